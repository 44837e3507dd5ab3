package admin

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/intentius/boxbroker/internal/operator"
)

// The admin API's bodies. Times are RFC 3339 in UTC with milliseconds, as
// the protocol writes them; a field that is not known is null.

// BoxList is the answer to GET /api/boxes. Next, in an answer to a page,
// is where the next page starts (the after of the next request); "" (and
// absent) on the last page.
type BoxList struct {
	Boxes []operator.BoxView `json:"boxes"`
	Next  string             `json:"next,omitempty"`
}

// CredentialList is the answer to GET /api/credentials.
type CredentialList struct {
	Credentials []operator.CredentialView `json:"credentials"`
}

// CredentialValue is the body of PUT /api/credentials/{id} and PUT
// /api/visitors/{principal}: the value, write-only, and its kind, one of
// anthropic (absent: an Anthropic API key or setup token), bedrock or
// vertex (a cloud account: value is its JSON, as `boxbroker credential
// set anthropic --kind …` reads it from stdin; docs/cloud.md).
type CredentialValue struct {
	Value string `json:"value"`
	Kind  string `json:"kind,omitempty"`
}

// SecretRules is the body of PUT /api/boxes/{name}/secrets/{secret}/rules:
// what the secret may be spent on, each "METHOD PATTERN" as
// protocol.ParseSecretRule reads it (none or absent: every method and
// path), and each box's rate for it, N/PERIOD ("" or absent: none). They
// replace the secret's; its value, host, kind and body fields are kept.
type SecretRules struct {
	Rules []string `json:"rules,omitempty"`
	Rate  string   `json:"rate,omitempty"`
}

// FeedbackView is one kept feedback batch.
type FeedbackView struct {
	ID    int64           `json:"id"`
	At    string          `json:"at"`
	Words []string        `json:"words"`
	Body  json.RawMessage `json:"body"`
}

// FeedbackList answers GET /api/boxes/{name}/feedback: how many batches
// are kept, and a page of them, newest first. Next, when the page is not
// the last, is the after that asks for the one following it.
type FeedbackList struct {
	Count   int            `json:"count"`
	Batches []FeedbackView `json:"batches"`
	Next    string         `json:"next,omitempty"`
}

// apiRoutes is the admin API's route table. A later part adds its own
// routes with Server.Handle.
func (s *Server) apiRoutes() []Route {
	return append([]Route{
		{Pattern: "GET /healthz", Handle: s.healthz, Open: true},
		{Pattern: "GET /readyz", Handle: s.ready, Open: true},
		{Pattern: "GET /metrics", Handle: s.metrics, Open: true},

		{Pattern: "GET /api/boxes", Handle: answer(http.StatusOK, s.listBoxes)},
		{Pattern: "POST /api/boxes", Handle: decode(http.StatusCreated, nil, s.addBox)},
		{Pattern: "GET /api/boxes/{name}", Handle: answer(http.StatusOK, byPath(s, "name", (*operator.Service).Box))},
		{Pattern: "PATCH /api/boxes/{name}", Handle: decode(http.StatusOK, s.boxExists, byPathBody(s, "name", (*operator.Service).UpdateBox))},
		{Pattern: "DELETE /api/boxes/{name}", Handle: s.removeBy("name", (*operator.Service).RemoveBox)},
		{Pattern: "POST /api/boxes/{name}/token", Handle: decodeOptional(http.StatusOK, s.boxExists, byPathBody(s, "name", (*operator.Service).RotateBoxWith))},

		{Pattern: "GET /api/credentials", Handle: answer(http.StatusOK, listed("credentials", byOp(s, (*operator.Service).ListCredentials)))},
		{Pattern: "PUT /api/credentials/{id}", Handle: decode(http.StatusOK, nil, s.setCredential)},
		{Pattern: "DELETE /api/credentials/{id}", Handle: s.removeBy("id", (*operator.Service).RemoveCredential)},

		{Pattern: "GET /api/boxes/{name}/secrets", Handle: answer(http.StatusOK, listed("secrets", byPath(s, "name", (*operator.Service).ListSecrets)))},
		{Pattern: "PUT /api/boxes/{name}/secrets/{secret}", Handle: decode(http.StatusOK, nil, s.setSecret)},
		{Pattern: "DELETE /api/boxes/{name}/secrets/{secret}", Handle: noContent(s.removeSecret)},
		{Pattern: "PUT /api/boxes/{name}/secrets/{secret}/rules", Handle: decode(http.StatusOK, nil, s.setSecretRules)},

		{Pattern: "GET /api/boxes/{name}/feedback", Handle: answer(http.StatusOK, s.listFeedback)},

		{Pattern: "GET /api/boxes/{name}/resources", Handle: answer(http.StatusOK, listed("resources", byPath(s, "name", (*operator.Service).ListResources)))},
		{Pattern: "POST /api/boxes/{name}/resources", Handle: decode(http.StatusCreated, s.boxExists, byPathBody(s, "name", (*operator.Service).AddResource))},
		{Pattern: "DELETE /api/boxes/{name}/resources/{kind}/{id}", Handle: noContent(s.removeResource)},

		{Pattern: "GET /api/audit", Handle: answer(http.StatusOK, s.listAudit)},
		{Pattern: "GET /api/audit.csv", Handle: s.AuditCSV},

		{Pattern: "PUT /api/boxes/{name}/payer", Handle: decode(http.StatusOK, nil, byPathBody(s, "name", (*operator.Service).SetPayer))},

		{Pattern: "GET /api/visitors", Handle: answer(http.StatusOK, listed("visitors", byOp(s, (*operator.Service).ListVisitors)))},
		{Pattern: "PUT /api/visitors/{principal}", Handle: decode(http.StatusOK, nil, s.setVisitor)},
		{Pattern: "DELETE /api/visitors/{principal}", Handle: s.removeBy("principal", (*operator.Service).RemoveVisitor)},

		{Pattern: "GET /api/boxes/{name}/grants", Handle: answer(http.StatusOK, listed("grants", byPath(s, "name", (*operator.Service).ListGrants)))},
		{Pattern: "POST /api/boxes/{name}/grants", Handle: decode(http.StatusCreated, boxNamed, byPathBody(s, "name", (*operator.Service).IssueGrant))},
		// A revoked grant is kept, listed as revoked; revoking it again
		// keeps its first revocation time and answers 204 again.
		{Pattern: "DELETE /api/grants/{id}", Handle: s.removeBy("id", (*operator.Service).RevokeGrant)},

		{Pattern: "GET /api/boxes/{name}/budgets", Handle: boxMonth(s.op.Budgets)},
		{Pattern: "PUT /api/boxes/{name}/budgets", Handle: decode(http.StatusOK, boxNamed, byPathBody(s, "name", (*operator.Service).SetBudget))},
		{Pattern: "DELETE /api/boxes/{name}/budgets", Handle: noContent(s.removeBudget)},
		{Pattern: "GET /api/boxes/{name}/spend", Handle: boxMonth(s.op.Spend)},
		{Pattern: "GET /api/spend", Handle: answer(http.StatusOK, s.fleetSpend)},
		{Pattern: "GET /api/spend.csv", Handle: s.SpendCSV},
	}, slices.Concat(s.poolRoutes(), s.limitRoutes(), s.proposalRoutes(), s.deadLetterRoutes(), s.proxyCARoutes(), s.priceRoutes())...)
}
