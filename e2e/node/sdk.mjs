// The official TypeScript SDK for the Anthropic API, pointed at boxbroker
// as a box points it: baseURL <broker>/llm/anthropic and the box's token as
// the API key. Run by e2e/node_test.go, which reads one JSON object a line
// from stdout. Tokens come from the environment, never argv:
//
//   BROKER_ANTHROPIC_URL  <broker>/llm/anthropic
//   AGENT_TOKEN           a box whose declaration lists inference agent
//   REFUSED_TOKEN         a box whose declaration does not
import Anthropic from "@anthropic-ai/sdk";

const baseURL = process.env.BROKER_ANTHROPIC_URL;
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// client returns an SDK client with the SDK's default retries, counting
// every HTTP attempt it makes.
function client(apiKey) {
  const counter = { attempts: 0 };
  const c = new Anthropic({
    baseURL,
    apiKey,
    authToken: null,
    maxRetries: 2,
    fetch: (url, init) => {
      counter.attempts++;
      return fetch(url, init);
    },
  });
  return { c, counter };
}

const model = "claude-sonnet-4-5";
const messages = [{ role: "user", content: "say hi through the broker" }];

async function main() {
  const { c } = client(process.env.AGENT_TOKEN);

  const msg = await c.messages.create({ model, max_tokens: 64, messages });
  say({ case: "messages", id: msg.id, model: msg.model, text: msg.content.map((b) => b.text).join(""), stop_reason: msg.stop_reason, output_tokens: msg.usage.output_tokens });

  const stream = await c.messages.create({ model, max_tokens: 64, messages, stream: true });
  const types = [];
  let text = "";
  for await (const ev of stream) {
    types.push(ev.type);
    say({ case: "stream-event", type: ev.type });
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
  }
  say({ case: "stream", types, text });

  const count = await c.messages.countTokens({ model, messages: [{ role: "user", content: "count me" }] });
  say({ case: "count_tokens", input_tokens: count.input_tokens });

  const page = await c.models.list({ limit: 5 });
  const got = await c.models.retrieve("claude-haiku-4-5");
  say({ case: "models", list: page.data.map((m) => m.id), has_more: page.has_more, get: got.id });

  const refused = {
    messages: (r) => r.messages.create({ model, max_tokens: 64, messages }),
    stream: async (r) => {
      const s = await r.messages.create({ model, max_tokens: 64, messages, stream: true });
      for await (const _ of s) { /* nothing comes */ }
    },
    count_tokens: (r) => r.messages.countTokens({ model, messages }),
    models: (r) => r.models.list(),
  };
  for (const [call, run] of Object.entries(refused)) {
    const { c: r, counter } = client(process.env.REFUSED_TOKEN);
    try {
      await run(r);
      say({ case: "refused", call, ok: true, attempts: counter.attempts });
    } catch (e) {
      say({
        case: "refused",
        call,
        ok: false,
        apiError: e instanceof Anthropic.APIError,
        permissionDenied: e instanceof Anthropic.PermissionDeniedError,
        status: e.status ?? null,
        type: e.type ?? null,
        apiMessage: e.apiMessage ?? null,
        message: String(e.message),
        attempts: counter.attempts,
      });
    }
  }
}

main().then(
  () => say({ case: "done" }),
  (e) => {
    say({ case: "failed", name: e?.name ?? null, status: e?.status ?? null, message: String(e?.message ?? e) });
    process.exitCode = 1;
  },
);
