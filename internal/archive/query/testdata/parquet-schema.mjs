// Reads a Parquet file's footer with hyparquet (not ClickHouse, the
// writer) and prints it as JSON: each column's name, physical type,
// repetition (REQUIRED or OPTIONAL: nullable), logical type, and the rows
// of each row group.
// Usage: node parquet-schema.mjs TOOLS_DIR FILE
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [tools, file] = process.argv.slice(2);
const { parquetMetadata } = await import(join(tools, "node_modules/hyparquet/src/index.js"));

const bytes = readFileSync(file);
const meta = parquetMetadata(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
const columns = meta.schema.slice(1).map((c) => ({
  name: c.name,
  type: c.type,
  repetition: c.repetition_type,
  logical: c.logical_type ? c.logical_type.type + (c.logical_type.bitWidth ? String(c.logical_type.bitWidth) : "") +
    (c.logical_type.isSigned === false ? "u" : "") : "",
}));
console.log(JSON.stringify({ columns, rowGroups: meta.row_groups.map((g) => Number(g.num_rows)) }));
