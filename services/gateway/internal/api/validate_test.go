package api

import (
	"testing"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
)

func TestValidateAcks(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		in   *int32
		want int
		err  bool
	}{
		{nil, -1, false}, {i(0), 0, false}, {i(1), 1, false}, {i(-1), -1, false},
		{i(5), 0, true}, {i(2), 0, true}, {i(-2), 0, true},
	} {
		got, err := validateAcks(tc.in)
		if (err != nil) != tc.err || (err == nil && got != tc.want) || (err != nil && errs.Of(err) != errs.InvalidRequiredAcks) {
			t.Errorf("validateAcks(%v) = %d, %v", tc.in, got, err)
		}
	}
}

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		in       []byte
		enc      skeinv1.Encoding
		text     string
		hasText  bool
		hasBytes bool
	}{
		{nil, skeinv1.Encoding_TEXT, "", false, false},
		{[]byte{}, skeinv1.Encoding_TEXT, "", true, false},
		{[]byte("héllo"), skeinv1.Encoding_TEXT, "héllo", true, false},
		{[]byte{0xff}, skeinv1.Encoding_TEXT, "", false, true},
		{[]byte("héllo"), skeinv1.Encoding_BYTES, "", false, true},
	} {
		text, raw := encode(tc.in, tc.enc)
		if (text != nil) != tc.hasText || (raw != nil) != tc.hasBytes || (text != nil && *text != tc.text) {
			t.Errorf("encode(%q, %s) = %v, %v", tc.in, tc.enc, text, raw)
		}
	}
}

func TestValidateRead(t *testing.T) {
	for _, tc := range []struct {
		iso skeinv1.IsolationLevel
		enc skeinv1.Encoding
		ok  bool
	}{
		{skeinv1.IsolationLevel_READ_UNCOMMITTED, skeinv1.Encoding_TEXT, true},
		{skeinv1.IsolationLevel_READ_COMMITTED, skeinv1.Encoding_BYTES, true},
		{7, skeinv1.Encoding_TEXT, false},
		{-1, skeinv1.Encoding_TEXT, false},
		{skeinv1.IsolationLevel_READ_COMMITTED, 9, false},
	} {
		err := validateRead(tc.iso, tc.enc)
		if (err == nil) != tc.ok || (err != nil && errs.Of(err) != errs.InvalidRequest) {
			t.Errorf("validateRead(%d, %d) = %v", tc.iso, tc.enc, err)
		}
	}
}
