package cloud

// bedrockModels maps Anthropic model names, and their dated forms, to
// Amazon Bedrock's model ids. A credential's Models come first.
var bedrockModels = map[string]string{
	"claude-opus-4-5":            "anthropic.claude-opus-4-5-20251101-v1:0",
	"claude-opus-4-5-20251101":   "anthropic.claude-opus-4-5-20251101-v1:0",
	"claude-haiku-4-5":           "anthropic.claude-haiku-4-5-20251001-v1:0",
	"claude-haiku-4-5-20251001":  "anthropic.claude-haiku-4-5-20251001-v1:0",
	"claude-sonnet-4-5":          "anthropic.claude-sonnet-4-5-20250929-v1:0",
	"claude-sonnet-4-5-20250929": "anthropic.claude-sonnet-4-5-20250929-v1:0",
	"claude-opus-4-1":            "anthropic.claude-opus-4-1-20250805-v1:0",
	"claude-opus-4-1-20250805":   "anthropic.claude-opus-4-1-20250805-v1:0",
	"claude-opus-4-0":            "anthropic.claude-opus-4-20250514-v1:0",
	"claude-opus-4-20250514":     "anthropic.claude-opus-4-20250514-v1:0",
	"claude-sonnet-4-0":          "anthropic.claude-sonnet-4-20250514-v1:0",
	"claude-sonnet-4-20250514":   "anthropic.claude-sonnet-4-20250514-v1:0",
	"claude-3-7-sonnet-latest":   "anthropic.claude-3-7-sonnet-20250219-v1:0",
	"claude-3-7-sonnet-20250219": "anthropic.claude-3-7-sonnet-20250219-v1:0",
	"claude-3-5-haiku-latest":    "anthropic.claude-3-5-haiku-20241022-v1:0",
	"claude-3-5-haiku-20241022":  "anthropic.claude-3-5-haiku-20241022-v1:0",
	"claude-3-5-sonnet-20241022": "anthropic.claude-3-5-sonnet-20241022-v2:0",
	"claude-3-5-sonnet-20240620": "anthropic.claude-3-5-sonnet-20240620-v1:0",
	"claude-3-haiku-20240307":    "anthropic.claude-3-haiku-20240307-v1:0",
}

// vertexModels maps Anthropic model names, and their dated forms, to
// Vertex AI's model ids. A credential's Models come first.
var vertexModels = map[string]string{
	"claude-opus-4-5":            "claude-opus-4-5@20251101",
	"claude-opus-4-5-20251101":   "claude-opus-4-5@20251101",
	"claude-haiku-4-5":           "claude-haiku-4-5@20251001",
	"claude-haiku-4-5-20251001":  "claude-haiku-4-5@20251001",
	"claude-sonnet-4-5":          "claude-sonnet-4-5@20250929",
	"claude-sonnet-4-5-20250929": "claude-sonnet-4-5@20250929",
	"claude-opus-4-1":            "claude-opus-4-1@20250805",
	"claude-opus-4-1-20250805":   "claude-opus-4-1@20250805",
	"claude-opus-4-0":            "claude-opus-4@20250514",
	"claude-opus-4-20250514":     "claude-opus-4@20250514",
	"claude-sonnet-4-0":          "claude-sonnet-4@20250514",
	"claude-sonnet-4-20250514":   "claude-sonnet-4@20250514",
	"claude-3-7-sonnet-latest":   "claude-3-7-sonnet@20250219",
	"claude-3-7-sonnet-20250219": "claude-3-7-sonnet@20250219",
	"claude-3-5-haiku-latest":    "claude-3-5-haiku@20241022",
	"claude-3-5-haiku-20241022":  "claude-3-5-haiku@20241022",
	"claude-3-5-sonnet-20241022": "claude-3-5-sonnet-v2@20241022",
	"claude-3-5-sonnet-20240620": "claude-3-5-sonnet@20240620",
	"claude-3-haiku-20240307":    "claude-3-haiku@20240307",
}

// ModelID returns the cloud's id for the Anthropic model name: the
// credential's own Models first, then the built-in table. A name that is
// already one of those ids (a Bedrock "anthropic.…" id or inference
// profile, a Vertex "…@date") is taken as it is; no other is, so that a
// box names only models the operator's table or map holds, and the
// spend meter prices what it names. ok is false for any other name.
func (c *Credential) ModelID(model string) (id string, ok bool) {
	if id, ok := c.Models[model]; ok {
		return id, true
	}
	table := bedrockModels
	if c.Kind == KindVertex {
		table = vertexModels
	}
	if id, ok := table[model]; ok {
		return id, true
	}
	for _, id := range c.Models {
		if id == model {
			return id, true
		}
	}
	for _, id := range table {
		if id == model {
			return id, true
		}
	}
	return "", false
}
