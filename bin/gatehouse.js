#!/usr/bin/env node
// The `gatehouse` command. Gatehouse is TypeScript run by Node's type stripping, with no build
// step, so this shim only checks that this Node can do that and hands over to src/cli/main.ts.
if (!process.features.typescript) {
  process.stderr.write(
    `gatehouse: Node.js ${process.versions.node} cannot run Gatehouse's TypeScript sources: Node.js 24 is required ` +
      '(22.18 or later works too). In the repository, `npx node bin/gatehouse.js …` or `npm run gatehouse -- …` ' +
      "use the Node 24 that `npm ci` installs.\n",
  );
  process.exit(1);
}

const { runCli } = await import('../src/cli/main.ts');
const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
});
if (code !== 'running') process.exitCode = code;
