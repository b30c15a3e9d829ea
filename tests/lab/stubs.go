package lab

import "context"

func runGroup(ctx context.Context, o *Options) (*Outcome, error) { return nil, nil }
