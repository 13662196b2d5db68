// Writes, for each {previous, current} pair of the JSON array in the file
// argv[3], the diff the crawl API's git-diff mode builds: jsdiff's
// createTwoFilesPatch("previous.md", "current.md", previous, current, "",
// "", {context: 3}) as text and parse-diff's parse of it reduced to the
// fields the crawl API keeps (its lib/change-tracking-diff.ts), or null
// when no line was added or removed. argv[2] is the tools' directory
// (internal/testkit/archivetools).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.argv[2], "package.json"));
const { createTwoFilesPatch } = require("diff");
const parseDiff = require("parse-diff");

// kept names the change fields the crawl API copies for each change type,
// after type and content.
const kept = { normal: ["normal", "ln1", "ln2"], add: ["add", "ln"], del: ["del", "ln"] };

function crawlAPIDiff(previous, current) {
  const text = createTwoFilesPatch("previous.md", "current.md", previous, current, "", "", { context: 3 });
  const files = parseDiff(text);
  const changed = files.some(f => f.chunks.some(c => c.changes.some(ch => ch.type === "add" || ch.type === "del")));
  if (!changed) return null;
  return {
    text,
    json: {
      files: files.map(f => ({
        from: f.from || null,
        to: f.to || null,
        chunks: f.chunks.map(c => ({
          content: c.content,
          changes: c.changes.map(ch => {
            const out = { type: ch.type, content: ch.content };
            const names = kept[ch.type] ?? [];
            // The crawl API copies the fields only when the line-number
            // keys exist on the change (an "in" test).
            const lnKeys = names.filter(n => n.startsWith("ln"));
            if (lnKeys.length > 0 && lnKeys.every(k => k in ch)) {
              for (const n of names) out[n] = ch[n];
            }
            return out;
          }),
        })),
      })),
    },
  };
}

const pairs = JSON.parse(readFileSync(process.argv[3], "utf8"));
process.stdout.write(JSON.stringify(pairs.map(p => crawlAPIDiff(p.previous, p.current))));
