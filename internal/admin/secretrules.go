package admin

import "github.com/intentius/boxbroker/internal/operator"

// RulesMessage is the audit log's message for setting the secret name
// with rules and rate (operator.RulesMessage).
var RulesMessage = operator.RulesMessage
