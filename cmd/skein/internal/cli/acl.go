package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
)

// aclCmd is `skein acl add|list|remove`: Kafka's kafka-acls with the
// resource named by --topic, --group, --transactional-id or --cluster.
func aclCmd(ctx context.Context, args []string, io IO) error {
	if len(args) == 0 {
		return usagef("acl needs a subcommand: add, list or remove")
	}
	sub, args := args[0], args[1:]
	if subcommandHelp(io.Out, "acl", sub) {
		return flag.ErrHelp
	}
	switch sub {
	case "add", "list", "remove":
	default:
		return usagef("unknown acl subcommand %q", sub)
	}
	f := newFlags("acl "+sub, io, true)
	principal := f.String("principal", "", "the principal, e.g. User:alice (User:* for everyone)")
	topic := f.String("topic", "", "the topic (or topic prefix with --pattern prefixed; * for every topic)")
	group := f.String("group", "", "the consumer group (or prefix; * for every group)")
	txnID := f.String("transactional-id", "", "the transactional id (or prefix; * for every one)")
	cluster := f.Bool("cluster", false, "the cluster")
	pattern := f.String("pattern", "", "literal or prefixed; list and remove also take any (both). Default: literal for add, and for remove when it names a resource (as kafka-acls); any for list")
	operation := f.String("operation", "", "all, read, write, create, delete, alter or describe; add takes a comma-separated list")
	permission := f.String("permission", "", "allow (default for add) or deny")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("acl %s takes no arguments, got %q", sub, pos)
	}
	var resType, resName string
	n := 0
	for _, r := range []struct{ typ, name string }{{"topic", *topic}, {"group", *group}, {"transactional_id", *txnID}} {
		if r.name != "" {
			resType, resName = r.typ, r.name
			n++
		}
	}
	if *cluster {
		resType, resName = "cluster", ""
		n++
	}
	if n > 1 {
		return usagef("acl %s: name one resource (--topic, --group, --transactional-id or --cluster)", sub)
	}
	if sub == "add" && (n == 0 || *principal == "" || *operation == "") {
		return usagef("acl add needs --principal, --operation and one of --topic, --group, --transactional-id or --cluster")
	}
	if sub == "remove" && n == 0 && *principal == "" && *operation == "" && (*pattern == "" || *pattern == "any") && *permission == "" {
		return usagef("acl remove needs a filter: at least one of its flags (acl list shows what it would match)")
	}
	// The names are checked here as the gateway checks them: a misspelt
	// one is the command line's mistake (exit 2), not the cluster's.
	ops := []string{*operation}
	if sub == "add" {
		ops = strings.Split(*operation, ",")
	}
	for _, op := range ops {
		if op = strings.TrimSpace(op); op != "" || sub == "add" {
			if _, err := acl.ParseOperation(op); err != nil {
				return usagef("--operation: %s", errs.Message(err))
			}
		}
	}
	switch {
	case *pattern == "any" && sub != "add":
		*pattern = "" // the API's filter for either
	case *pattern != "":
		if _, err := acl.ParsePatternType(*pattern); err != nil {
			return usagef("--pattern: %s", errs.Message(err))
		}
	case sub == "remove" && n > 0:
		// kafka-acls --remove: a named resource is the literal one, so
		// that removing orders's bindings leaves those of the prefix
		// orders alone unless asked.
		*pattern = "literal"
	}
	if *permission != "" {
		if _, err := acl.ParsePermission(*permission); err != nil {
			return usagef("--permission: %s", errs.Message(err))
		}
	}

	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := skeinv1.NewAdminServiceClient(conn)
	cctx, cancel := timeout(ctx)
	defer cancel()

	switch sub {
	case "add":
		req := &skeinv1.CreateAclsRequest{}
		for _, op := range strings.Split(*operation, ",") {
			req.Acls = append(req.Acls, &skeinv1.AclBinding{Principal: *principal, ResourceType: resType, ResourceName: resName,
				PatternType: *pattern, Operation: strings.TrimSpace(op), Permission: *permission})
		}
		resp, err := admin.CreateAcls(cctx, req)
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp)
		}
		fmt.Fprintf(io.Out, "added %d ACL binding(s)\n", len(resp.GetAcls()))
		return printAcls(io, resp.GetAcls())
	case "list":
		resp, err := admin.DescribeAcls(cctx, &skeinv1.DescribeAclsRequest{Principal: *principal, ResourceType: resType, ResourceName: resName,
			PatternType: *pattern, Operation: *operation, Permission: *permission})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp)
		}
		return printAcls(io, resp.GetAcls())
	default: // remove
		resp, err := admin.DeleteAcls(cctx, &skeinv1.DeleteAclsRequest{Principal: *principal, ResourceType: resType, ResourceName: resName,
			PatternType: *pattern, Operation: *operation, Permission: *permission})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp)
		}
		fmt.Fprintf(io.Out, "removed %d ACL binding(s)\n", len(resp.GetDeleted()))
		return printAcls(io, resp.GetDeleted())
	}
}

func printAcls(io IO, acls []*skeinv1.AclBinding) error {
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tPERMISSION\tOPERATION\tRESOURCE\tNAME\tPATTERN")
	for _, a := range acls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.GetPrincipal(), a.GetPermission(), a.GetOperation(), a.GetResourceType(), a.GetResourceName(), a.GetPatternType())
	}
	return tw.Flush()
}
