// The official TypeScript SDK for the Anthropic API, pointed at boxbroker
// as a box points it, where the broker pays through a cloud (Amazon
// Bedrock or Google Vertex AI): the box's code is the same as for the
// Anthropic API. Run by e2e/cloud_test.go, which reads one JSON object a
// line from stdout. Tokens come from the environment, never argv:
//
//   BROKER_ANTHROPIC_URL  <broker>/llm/anthropic
//   AGENT_TOKEN           a box whose declaration lists inference agent
import Anthropic from "@anthropic-ai/sdk";

const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const model = "claude-sonnet-4-5";
const messages = [{ role: "user", content: "say hi through the cloud" }];

async function main() {
  const c = new Anthropic({
    baseURL: process.env.BROKER_ANTHROPIC_URL,
    apiKey: process.env.AGENT_TOKEN,
    authToken: null,
    maxRetries: 0,
  });

  const msg = await c.messages.create({ model, max_tokens: 64, messages });
  say({ case: "messages", model: msg.model, text: msg.content.map((b) => b.text).join(""), stop_reason: msg.stop_reason, input_tokens: msg.usage.input_tokens, output_tokens: msg.usage.output_tokens });

  const stream = c.messages.stream({ model, max_tokens: 64, messages });
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  const final = await stream.finalMessage();
  say({ case: "stream", types, text: final.content.map((b) => b.text).join(""), output_tokens: final.usage.output_tokens });

  const count = await c.messages.countTokens({ model, messages: [{ role: "user", content: "count me" }] });
  say({ case: "count_tokens", input_tokens: count.input_tokens });

  // A cloud has no models list: the broker answers a 400 naming it.
  try {
    await c.models.list();
    say({ case: "models", ok: true });
  } catch (e) {
    say({ case: "models", ok: false, badRequest: e instanceof Anthropic.BadRequestError, status: e.status ?? null, message: String(e.message) });
  }
}

main().then(
  () => say({ case: "done" }),
  (e) => {
    say({ case: "failed", name: e?.name ?? null, status: e?.status ?? null, message: String(e?.message ?? e) });
    process.exitCode = 1;
  },
);
