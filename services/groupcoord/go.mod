module skein/services/groupcoord

go 1.26.0

replace (
	skein/gen => ../../gen
	skein/libs => ../../libs
)

require pgregory.net/rapid v1.3.0
