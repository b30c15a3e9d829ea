package lab

import "context"

func runMinISR(ctx context.Context, o *Options) (*Outcome, error)  { return nil, nil }
func runGroup(ctx context.Context, o *Options) (*Outcome, error)   { return nil, nil }
func runUnclean(ctx context.Context, o *Options) (*Outcome, error) { return nil, nil }
