// Indexes a WARC with webrecorder's warcio command line tool (warcio.js
// cdx-index, not gowarc, the writer's library, nor crawlhouse's indexer) and
// prints its CDXJ.
// Usage: node warcio-cdx-index.mjs TOOLS_DIR FILE
import { execFileSync } from "node:child_process";
import { join } from "node:path";

const [tools, file] = process.argv.slice(2);
const cli = join(tools, "node_modules/warcio/dist/cli.js");
process.stdout.write(execFileSync(process.execPath, [cli, "cdx-index", file], { maxBuffer: 1 << 30 }));
