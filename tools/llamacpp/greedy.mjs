// Greedy replies of llama.cpp to prompts given as token ids, for esopt's GGUF check (esopt bench llamacpp,
// tests/test_llamacpp.py). llama.cpp is node-llama-cpp's prebuilt CPU build (make install-llamacpp).
// stdin: JSON {model, threads, context, kv, flash_attention, prompts: [{text, tokens, max_tokens}]}; kv: the KV
// cache's type, "F16" (llama.cpp's default) or "F32"; flash_attention: true, false or "auto" (the default)
// stdout: JSON {seconds, replies: [{text_tokens, reply_tokens, reply}]}: text_tokens is llama.cpp's own
// tokenization of `text` (special tokens parsed), for comparison; the reply continues `tokens`, drawn
// greedily (temperature 0) until the end-of-generation token or max_tokens.
import {getLlama} from "node-llama-cpp";

const input = JSON.parse(await new Promise((done) => {
  let text = "";
  process.stdin.on("data", (chunk) => { text += chunk; });
  process.stdin.on("end", () => done(text));
}));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: input.model});
const kv = input.kv || "F16";
const context = await model.createContext({contextSize: input.context || 2048, threads: input.threads || 1,
                                           experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv,
                                           flashAttention: input.flash_attention ?? "auto"});
const start = performance.now();
const replies = [];
for (const prompt of input.prompts) {
  const sequence = context.getSequence();
  const reply = [];
  for await (const token of sequence.evaluate(prompt.tokens, {temperature: 0})) {
    if (model.isEogToken(token)) break;
    reply.push(token);
    if (reply.length >= prompt.max_tokens) break;
  }
  replies.push({text_tokens: Array.from(model.tokenize(prompt.text, true)), reply_tokens: reply,
                reply: model.detokenize(reply, false)});
  sequence.dispose();
}
process.stdout.write(JSON.stringify({seconds: (performance.now() - start) / 1000, replies}));
await context.dispose();
await model.dispose();
