package topicname

import (
	"strings"
	"testing"

	"skein/libs/errs"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{"...", true},
		{strings.Repeat("x", 249), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", 250), false},
		{"a b", false},
		{"a/b", false},
		{"café", false},
		{"ünïcode", false},
		{"tab\t", false},
	} {
		err := Validate(tc.name)
		if (err == nil) != tc.ok || (err != nil && errs.Of(err) != errs.InvalidTopic) {
			t.Errorf("Validate(%.20q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
