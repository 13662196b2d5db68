// Reads a .warc.gz with webrecorder's warcio (not gowarc, the writer's
// library) and prints one JSON line per record: its type, target, the
// warcinfo it cites, the HTTP status of a response, the payload, and
// whether the payload's SHA-1 matches WARC-Payload-Digest.
// Usage: node warcio-read.mjs TOOLS_DIR FILE
import { createReadStream } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";

const [tools, file] = process.argv.slice(2);
const { WARCParser } = await import(join(tools, "node_modules/warcio/dist/index.js"));

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
function base32(bytes) {
  let out = "", bits = 0, value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  while (out.length % 8) out += "=";
  return out;
}

const parser = new WARCParser(createReadStream(file));
for await (const record of parser) {
  const payload = await record.readFully(true);
  const declared = record.warcHeader("WARC-Payload-Digest");
  const line = {
    type: record.warcType,
    id: record.warcHeader("WARC-Record-ID") || "",
    target: record.warcTargetURI || "",
    warcinfo: record.warcHeader("WARC-Warcinfo-ID") || "",
    status: record.httpHeaders ? Number(record.httpHeaders.statusCode) : 0,
    payload: new TextDecoder().decode(payload),
    digestOK: declared ? declared === "sha1:" + base32(createHash("sha1").update(payload).digest()) : null,
  };
  console.log(JSON.stringify(line));
}
