// Package e2e runs real clients against a whole boxbroker: the official
// Anthropic SDKs for Go and TypeScript and Claude Code itself, each pointed
// at <broker>/llm/anthropic with a box's token as its API key, against a
// recording stand-in for the Anthropic API on loopback, or, in
// cloud_test.go, against a broker paying through Amazon Bedrock or Google
// Vertex AI (the internal/cloud/cloudtest stand-ins). It holds only
// tests; the TypeScript side lives in e2e/node.
package e2e
