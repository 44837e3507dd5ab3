package ui_test

// The owner's page's tests share these keys with the admin API's (package
// admin's tests); the calls they make are brokertest's Call and PaidBy.
const (
	sharedKey  = "sk-ant-api03-SHARED-0123456789"
	visitorKey = "sk-ant-api03-VISITOR-0123456789"
)
