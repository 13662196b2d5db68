// Opens a WACZ with node's own zlib (not Go's archive/zip, the writer's
// library), from its central directory as replay tools do, checks each
// resource of datapackage.json against its file's sha256 and size, and
// prints one JSON line: each file's name, compression method and size, the
// datapackage itself, and the text of the index and the pages.
// Usage: node wacz-check.mjs TOOLS_DIR FILE
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { inflateRawSync } from "node:zlib";

const [, file] = process.argv.slice(2);
const zip = readFileSync(file);

// The end of central directory record, then the central directory.
const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
if (eocd < 0) throw new Error("no end of central directory");
const count = zip.readUInt16LE(eocd + 10);
let at = zip.readUInt32LE(eocd + 16);
const files = {};
for (let i = 0; i < count; i++) {
  if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error("bad central directory entry " + i);
  const method = zip.readUInt16LE(at + 10);
  const crc = zip.readUInt32LE(at + 16);
  const size = zip.readUInt32LE(at + 20);
  const nameLen = zip.readUInt16LE(at + 28), extraLen = zip.readUInt16LE(at + 30), commentLen = zip.readUInt16LE(at + 32);
  const local = zip.readUInt32LE(at + 42);
  const name = zip.toString("utf8", at + 46, at + 46 + nameLen);
  at += 46 + nameLen + extraLen + commentLen;
  if (zip.readUInt32LE(local) !== 0x04034b50) throw new Error("bad local header of " + name);
  const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
  const raw = zip.subarray(start, start + size);
  const data = method === 0 ? raw : inflateRawSync(raw);
  files[name] = { method, data, crc };
}

const pkg = JSON.parse(files["datapackage.json"].data.toString("utf8"));
const problems = [];
for (const res of pkg.resources) {
  const f = files[res.path];
  if (!f) { problems.push("missing " + res.path); continue; }
  const hash = "sha256:" + createHash("sha256").update(f.data).digest("hex");
  if (hash !== res.hash) problems.push(res.path + ": hash " + hash + ", datapackage says " + res.hash);
  if (f.data.length !== res.bytes) problems.push(res.path + ": " + f.data.length + " bytes, datapackage says " + res.bytes);
}
console.log(JSON.stringify({
  files: Object.entries(files).map(([name, f]) => ({ name, method: f.method, bytes: f.data.length })),
  datapackage: pkg,
  problems,
  index: files["indexes/index.cdxj"]?.data.toString("utf8") ?? "",
  pages: files["pages/pages.jsonl"]?.data.toString("utf8") ?? "",
}));
