#!/usr/bin/env node
// The `dedicated` command (package.json "bin"): runs the TypeScript CLI through tsx.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/dedicated/main.ts');
process.exitCode = await main(process.argv.slice(2));
