module skein/services/txncoord

go 1.26.0

// skein/gen is only here for go mod tidy, which follows the tests of
// skein/libs/errs (they import it); nothing in this module builds with it.
replace (
	skein/gen => ../../gen
	skein/libs => ../../libs
)

require skein/libs v0.0.0
