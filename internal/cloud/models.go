package cloud

import "cmp"

// undated are the Anthropic model names from Claude 4.6 on, which have
// no dated form: Vertex AI's id is the name, Bedrock's "anthropic.<name>"
// (bar the two Claude 4.6 models, whose ids Bedrock gave otherwise).
// Every such name the price file (internal/spend/prices.json) prices is
// here (TestModels_CoverThePriceFile).
var undated = []string{
	"claude-opus-4-6", "claude-sonnet-4-6",
	"claude-opus-4-7", "claude-opus-4-8",
	"claude-opus-5", "claude-sonnet-5",
	"claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5",
	"claude-fable-5", "claude-fable-5-1",
	"claude-mythos-5", "claude-mythos-5-1",
}

// bedrockUndated are Bedrock's ids of undated names that are not
// "anthropic.<name>".
var bedrockUndated = map[string]string{
	"claude-opus-4-6": "anthropic.claude-opus-4-6-v1",
}

// dated are the Anthropic model names with a dated form (the name and
// its dated form, or the dated form alone), with the clouds' model ids:
// Amazon Bedrock's, then Vertex AI's. The newer models are offered on
// Bedrock only through cross-region inference profiles: a credential's
// Profile prefixes these ids.
var dated = []struct {
	names           []string
	bedrock, vertex string
}{
	{[]string{"claude-opus-4-5", "claude-opus-4-5-20251101"}, "anthropic.claude-opus-4-5-20251101-v1:0", "claude-opus-4-5@20251101"},
	{[]string{"claude-haiku-4-5", "claude-haiku-4-5-20251001"}, "anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5@20251001"},
	{[]string{"claude-sonnet-4-5", "claude-sonnet-4-5-20250929"}, "anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5@20250929"},
	{[]string{"claude-opus-4-1", "claude-opus-4-1-20250805"}, "anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1@20250805"},
	{[]string{"claude-opus-4-0", "claude-opus-4-20250514"}, "anthropic.claude-opus-4-20250514-v1:0", "claude-opus-4@20250514"},
	{[]string{"claude-sonnet-4-0", "claude-sonnet-4-20250514"}, "anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4@20250514"},
	{[]string{"claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"}, "anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet@20250219"},
	{[]string{"claude-3-5-haiku-latest", "claude-3-5-haiku-20241022"}, "anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku@20241022"},
	{[]string{"claude-3-5-sonnet-20241022"}, "anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet-v2@20241022"},
	{[]string{"claude-3-5-sonnet-20240620"}, "anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet@20240620"},
	{[]string{"claude-3-haiku-20240307"}, "anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku@20240307"},
}

// bedrockModels and vertexModels map Anthropic model names to each
// cloud's model ids: dated's and undated's. A credential's Models come
// first.
var bedrockModels, vertexModels = modelTables()

func modelTables() (bedrock, vertex map[string]string) {
	bedrock, vertex = map[string]string{}, map[string]string{}
	for _, d := range dated {
		for _, name := range d.names {
			bedrock[name], vertex[name] = d.bedrock, d.vertex
		}
	}
	for _, name := range undated {
		bedrock[name] = cmp.Or(bedrockUndated[name], "anthropic."+name)
		vertex[name] = name
	}
	return bedrock, vertex
}

// ModelID returns the cloud's id for the Anthropic model name: the
// credential's own Models first, then the built-in table (through the
// credential's Profile, on Bedrock, when it names one). A name that is
// already one of those ids (a Bedrock "anthropic.…" id or inference
// profile, a Vertex "…@date") is taken as it is; no other is, so that a
// box names only models the operator's table or map holds, and the
// spend meter prices what it names. ok is false for any other name.
func (c *Credential) ModelID(model string) (id string, ok bool) {
	id, _, ok = c.modelID(model)
	return id, ok
}

// modelID is ModelID's, with bare: the id without the Profile's prefix
// (Bedrock's CountTokens takes no inference profile).
func (c *Credential) modelID(model string) (id, bare string, ok bool) {
	if id, ok := c.Models[model]; ok {
		return id, id, true
	}
	table := bedrockModels
	if c.Kind == KindVertex {
		table = vertexModels
	}
	if id, ok := table[model]; ok {
		return c.profiled(id), id, true
	}
	for _, id := range c.Models {
		if id == model {
			return id, id, true
		}
	}
	for _, id := range table {
		if id == model || c.profiled(id) == model {
			return c.profiled(id), id, true
		}
	}
	return "", "", false
}

// profiled is a built-in id sent through the credential's Profile.
func (c *Credential) profiled(id string) string {
	if c.Kind != KindBedrock || c.Profile == "" {
		return id
	}
	return c.Profile + "." + id
}
