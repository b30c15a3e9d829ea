// Package tools pins the code generators used by `make proto` as go tool
// directives, so every machine generates byte-identical code in gen/.
package tools
