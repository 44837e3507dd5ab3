package admin

import "github.com/intentius/boxbroker/internal/operator"

// The credential checks the pool's handlers make are the operator
// service's.
var (
	checkKind    = operator.CheckKind
	checkedValue = operator.CheckedValue
	isCloud      = operator.IsCloud
)
