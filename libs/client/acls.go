package client

import (
	"context"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
)

func aclErr(code int32, msg string) error {
	if code == 0 {
		return nil
	}
	return errs.Errorf(errs.ForCode(errs.Code(code)), "%s", msg)
}

// CreateAcls adds ACL bindings; it answers one error (nil for added) per
// binding, in order. err is for the call as a whole. The metadata snapshot
// may not hold them yet: see WaitMetadata.
func (c *Client) CreateAcls(ctx context.Context, bindings []acl.Binding) (results []error, err error) {
	req := &controllerv1.CreateAclsRequest{}
	for _, b := range bindings {
		req.Acls = append(req.Acls, metadata.AclOf(b))
	}
	var resp *controllerv1.CreateAclsResponse
	err = c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.CreateAcls(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetResults()) != len(bindings) {
		return nil, errs.Errorf(errs.UnknownServerError, "the controller answered %d results for %d bindings", len(resp.GetResults()), len(bindings))
	}
	for _, r := range resp.GetResults() {
		results = append(results, aclErr(r.GetErrorCode(), r.GetErrorMessage()))
	}
	return results, nil
}

// DeleteAcls removes the ACL bindings the filter selects and answers them.
func (c *Client) DeleteAcls(ctx context.Context, f acl.Filter) ([]acl.Binding, error) {
	var resp *controllerv1.DeleteAclsResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.DeleteAcls(ctx, &controllerv1.DeleteAclsRequest{Filters: []*controllerv1.AclFilter{metadata.AclFilterOf(f)}})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetResults()) != 1 {
		return nil, errs.Errorf(errs.UnknownServerError, "the controller answered %d results for 1 filter", len(resp.GetResults()))
	}
	r := resp.GetResults()[0]
	if err := aclErr(r.GetErrorCode(), r.GetErrorMessage()); err != nil {
		return nil, err
	}
	out := make([]acl.Binding, 0, len(r.GetDeleted()))
	for _, d := range r.GetDeleted() {
		out = append(out, metadata.Binding(d))
	}
	return out, nil
}

// DescribeAcls answers the bindings the filter selects from the metadata
// snapshot (nil before the first snapshot arrived).
func (c *Client) DescribeAcls(f acl.Filter) []acl.Binding {
	img := c.Metadata()
	if img == nil {
		return nil
	}
	return img.MatchingAcls(f)
}
