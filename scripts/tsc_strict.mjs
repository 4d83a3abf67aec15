// The strict ratchet for the page's JavaScript (`make lint`): the files listed in
// tsconfig.strict.json's "files" must pass TypeScript's `strict` checks. tsc has no per-file strict
// setting and checks every module a listed file imports, so this asks the compiler for the listed
// files' own diagnostics only; the other modules stay under tsconfig.json's rules until they join
// the list (tests/test_strict_ratchet.py keeps the list from shrinking).
import path from "node:path";
import process from "node:process";
import ts from "typescript";

const configPath = path.resolve("tsconfig.strict.json");
const read = ts.readConfigFile(configPath, ts.sys.readFile);
if (read.error) {
  console.error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  process.exit(2);
}
const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, path.dirname(configPath));
const strictFiles = new Set((read.config.files || []).map((file) => path.resolve(file)));
const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => "\n" };
let failures = 0;
for (const file of strictFiles) {
  const source = program.getSourceFile(file);
  if (!source) {
    console.error(`${path.relative(process.cwd(), file)}: listed in tsconfig.strict.json but not found`);
    failures += 1;
    continue;
  }
  const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
  if (diagnostics.length) process.stderr.write(ts.formatDiagnostics(diagnostics, host));
  failures += diagnostics.length;
}
if (failures) {
  console.error(`${failures} strict error(s) in the files of tsconfig.strict.json`);
  process.exit(1);
}
console.log(`strict: ${strictFiles.size} files clean`);
