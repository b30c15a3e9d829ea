package errs

import (
	"testing"

	skeinv1 "skein/gen/skein/v1"
)

// The ErrorCode enum in the protos and this table must be the same list: a
// code a peer sends must have a row, and every row must be sendable.
func TestTableMatchesProtoEnum(t *testing.T) {
	for num, name := range skeinv1.ErrorCode_name {
		row := ForCode(Code(num))
		if row.Code != Code(num) || row.Name != name {
			t.Errorf("proto %s=%d has no row (got %s=%d)", name, num, row.Name, row.Code)
		}
	}
	for _, row := range All() {
		if skeinv1.ErrorCode_name[int32(row.Code)] != row.Name {
			t.Errorf("row %s=%d is missing from the proto enum", row.Name, row.Code)
		}
	}
}
