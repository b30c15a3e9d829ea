package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"skein/libs/acl"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
	"skein/libs/metadata"
)

func TestAcls(t *testing.T) {
	cl := clienttest.Start(t, 1)
	c := newClient(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	read := acl.Binding{Principal: "User:bob", Resource: acl.Topic, Name: "orders", Pattern: acl.Literal, Operation: acl.Read, Permission: acl.Allow}
	bad := read
	bad.Pattern = 7

	res, err := c.CreateAcls(ctx, []acl.Binding{read, bad})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0] != nil || errs.Of(res[1]) != errs.InvalidRequest {
		t.Fatalf("CreateAcls = %v", res)
	}
	if _, err := c.WaitMetadata(ctx, func(img *metadata.Image) bool { return img.HasAcl(read) }); err != nil {
		t.Fatal(err)
	}
	if got := c.DescribeAcls(acl.Filter{Resource: acl.Topic}); !slices.Equal(got, []acl.Binding{read}) {
		t.Errorf("DescribeAcls(topic) = %v", got)
	}
	if got := c.DescribeAcls(acl.Filter{Resource: acl.Group}); len(got) != 0 {
		t.Errorf("DescribeAcls(group) = %v", got)
	}

	deleted, err := c.DeleteAcls(ctx, acl.Filter{Principal: "User:bob"})
	if err != nil || !slices.Equal(deleted, []acl.Binding{read}) {
		t.Fatalf("DeleteAcls = %v, %v", deleted, err)
	}
	if _, err := c.WaitMetadata(ctx, func(img *metadata.Image) bool { return len(img.Acls()) == 0 }); err != nil {
		t.Fatal(err)
	}
}
