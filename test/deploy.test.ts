/**
 * Docker cannot run here and hadolint is not packaged in Debian, so the Dockerfile and the
 * compose file are checked for the properties that matter: multi-stage, pinned base images,
 * a non-root user, a health check that needs no curl, data in a volume.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const dockerfile = readFileSync(new URL('../deploy/Dockerfile', import.meta.url), 'utf8');
const compose = readFileSync(new URL('../deploy/compose.yaml', import.meta.url), 'utf8');
/** Instructions with continuation lines joined and comments dropped. */
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'));
const of = (keyword: string) => instructions.filter((line) => line.toUpperCase().startsWith(`${keyword} `));

test('multi-stage: a build stage with npm ci and tsc, a runtime stage with production deps and dist/ only', () => {
  const stages = of('FROM');
  assert.ok(stages.length >= 2, 'at least two stages');
  assert.match(dockerfile, /RUN npm ci\b/);
  assert.match(dockerfile, /npm run build/);
  assert.match(dockerfile, /npm prune --omit=dev/);
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  assert.match(runtime, /COPY --from=build \/app\/dist/);
  assert.doesNotMatch(runtime, /COPY (src|app|channels) /, 'no sources in the runtime image');
});

test('base images are pinned: no latest, no untagged image', () => {
  for (const line of of('FROM')) {
    const image = line.split(/\s+/)[1]!;
    assert.match(image, /:/, `${image} has a tag`);
    assert.doesNotMatch(image, /:latest$/, `${image} is not :latest`);
    assert.match(image, /slim|alpine|distroless/, `${image} is a small image`);
  }
  assert.doesNotMatch(compose, /:latest\b/);
});

test('runs as a non-root user, keeps data in the /data volume, reads its config from /config', () => {
  const users = of('USER');
  assert.ok(users.length > 0, 'a USER instruction');
  const user = users.at(-1)!.split(/\s+/)[1]!;
  assert.ok(!['root', '0', '0:0'].includes(user), `the last USER (${user}) is not root`);
  assert.ok(dockerfile.lastIndexOf('\nUSER ') > dockerfile.lastIndexOf('\nFROM '), 'USER is set in the final stage');
  assert.ok(of('VOLUME').some((line) => /\/data\b/.test(line)), 'VOLUME /data');
  assert.match(dockerfile, /SWITCHBOARD_CONFIG=\/config\/config\.toml/);
  assert.match(compose, /- data:\/data/);
  assert.match(compose, /config\.toml:\/config\/config\.toml:ro/);
});

test('HEALTHCHECK probes /healthz with node (the slim image has no curl)', () => {
  const checks = of('HEALTHCHECK');
  assert.equal(checks.length, 1);
  assert.match(checks[0]!, /CMD \["node", "-e", ".*\/healthz/);
  assert.doesNotMatch(checks[0]!, /curl|wget/);
  // The probe is valid JavaScript.
  const source = JSON.parse(checks[0]!.slice(checks[0]!.indexOf('[')))[2] as string;
  assert.doesNotThrow(() => new Function(source));
});

test('the container starts the daemon in exec form (signals reach node)', () => {
  const cmd = of('CMD').at(-1)!;
  assert.match(cmd, /^CMD \[/);
  assert.match(cmd, /dist\/app\/cli\.js", "start"/);
});
