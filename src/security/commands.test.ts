import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assessCommand, createCommandPolicy, parseCommand } from './commands.ts';

const policy = createCommandPolicy();

function risk(command: string, p = policy): string {
  const result = assessCommand(command, p);
  if ('refused' in result) assert.fail(`${command} was refused: ${result.refused}`);
  return result.risk;
}

function refusal(command: string, p = policy): string {
  const result = assessCommand(command, p);
  if (!('refused' in result)) assert.fail(`${command} was accepted as ${result.risk}`);
  return result.refused;
}

describe('parseCommand', () => {
  it('splits on ; && || | and newlines, but not inside quotes or after a backslash', () => {
    const parsed = parseCommand('ls -la; echo "a;b" && echo \'c|d\' || wc -l | sort\necho e\\;f');
    assert.equal(parsed.ok, true);
    if (!parsed.ok) return;
    assert.deepEqual(
      parsed.segments.map((s) => s.words.map((w) => w.text)),
      [['ls', '-la'], ['echo', 'a;b'], ['echo', 'c|d'], ['wc', '-l'], ['sort'], ['echo', 'e;f']],
    );
  });

  it('marks unquoted wildcards only', () => {
    const parsed = parseCommand('ls *.ts "*.md"');
    assert.equal(parsed.ok, true);
    if (parsed.ok) assert.deepEqual(parsed.segments[0]!.words.map((w) => w.glob), [false, true, false]);
  });

  it('drops comments the way sh does', () => {
    const parsed = parseCommand('ls # rm -rf / ; `id`\necho a#b');
    assert.equal(parsed.ok, true);
    if (parsed.ok) assert.deepEqual(parsed.segments.map((s) => s.words.map((w) => w.text)), [['ls'], ['echo', 'a#b']]);
  });

  it('keeps 2>&1 and >/dev/null out of the words', () => {
    const parsed = parseCommand('ls 2>&1 >/dev/null | head');
    assert.equal(parsed.ok, true);
    if (parsed.ok) assert.deepEqual(parsed.segments.map((s) => s.words.map((w) => w.text)), [['ls'], ['head']]);
  });

  it('returns pipelines with their connectors, which is what the shell tool runs', () => {
    const parsed = parseCommand('a | b && c || d; e\nf');
    assert.ok(parsed.ok);
    assert.deepEqual(
      parsed.pipelines.map((p) => [p.connector, p.commands.map((c) => c.words.map((w) => w.text).join(' '))]),
      [[';', ['a', 'b']], ['&&', ['c']], ['||', ['d']], [';', ['e']], [';', ['f']]],
    );
  });

  it('keeps redirections in order, per command', () => {
    const parsed = parseCommand('a 2>&1 >/dev/null | b >&2 2>>/dev/null; c &>/dev/null; d 1>&2');
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.segments.map((s) => s.redirections), [
      [{ fd: 2, to: 1 }, { fd: 1, to: 'null' }],
      [{ fd: 1, to: 2 }, { fd: 2, to: 'null' }],
      [{ fd: 1, to: 'null' }, { fd: 2, to: 'null' }],
      [{ fd: 1, to: 2 }],
    ]);
  });

  it('continues a line after an operator, but refuses one at the end', () => {
    const parsed = parseCommand('ls &&\n  pwd |\n  cat');
    assert.ok(parsed.ok);
    assert.equal(parsed.pipelines.length, 2);
    for (const command of ['ls &&', 'ls ||', 'ls |', 'ls && # comment']) assert.equal(parseCommand(command).ok, false, command);
    assert.equal(parseCommand('ls;').ok, true);
  });

  it('does not let a lone redirection line swallow the next line', () => {
    const parsed = parseCommand('>/dev/null\nls');
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.segments.map((s) => s.words.length), [0, 1]);
  });

  it('marks only unquoted wildcard characters in the pattern', () => {
    const parsed = parseCommand(`ls "*"*'?'\\[`);
    assert.ok(parsed.ok);
    const word = parsed.segments[0]!.words[1]!;
    assert.deepEqual([word.text, word.pattern, word.glob], ['**?[', '\\**\\?\\[', true]);
  });

  it('refuses unterminated quotes and trailing backslashes', () => {
    assert.equal(parseCommand("echo 'abc").ok, false);
    assert.equal(parseCommand('echo "abc').ok, false);
    assert.equal(parseCommand('echo abc\\').ok, false);
  });
});

describe('assessCommand', () => {
  it('classifies by program and takes the highest risk over segments', () => {
    assert.equal(risk('ls -la'), 'low');
    assert.equal(risk('cat notes.md | grep -n todo | sort | uniq'), 'low');
    assert.equal(risk('git status'), 'medium');
    assert.equal(risk('ls && git pull && rm old.txt'), 'high');
    assert.equal(risk('cd src && ls'), 'low');
  });

  it('marks writing modes of read-only programs as medium and mutating', () => {
    const sorted = assessCommand('sort -o out.txt in.txt', policy);
    assert.ok(!('refused' in sorted) && sorted.risk === 'medium' && sorted.mutates);
    const find = assessCommand('find . -name "*.tmp" -delete', policy);
    assert.ok(!('refused' in find) && find.mutates);
    const ls = assessCommand('ls', policy);
    assert.ok(!('refused' in ls) && !ls.mutates && ls.summary === 'shell: ls');
  });

  it('refuses shell features that hide code from the policy', () => {
    assert.match(refusal('echo $(id)'), /command substitution/);
    assert.match(refusal('echo "`id`"'), /command substitution/);
    assert.match(refusal('echo "$(id)"'), /command substitution/);
    assert.match(refusal('echo $HOME'), /variable expansion/);
    assert.match(refusal('echo "${PATH}"'), /variable expansion/);
    assert.match(refusal('diff <(ls) b'), /process substitution/);
    assert.match(refusal('cat <<EOF\nx\nEOF'), /here-documents/);
    assert.match(refusal('wc -l < notes.md'), /input redirection/);
    assert.match(refusal('echo hi > notes.md'), /output redirection/);
    assert.match(refusal('echo hi >> notes.md'), /output redirection/);
    assert.match(refusal('(cd / && ls)'), /subshells/);
    assert.match(refusal('{ ls; }'), /braces/);
    assert.match(refusal('sleep 100 &'), /background/);
    assert.match(refusal('FOO=bar ls'), /environment assignments/);
    assert.match(refusal('ls;; ls'), /empty part/);
    assert.match(refusal('ls;;'), /empty part/);
    assert.match(refusal('ls 2>&3'), /output redirection to descriptor 3/);
    assert.match(refusal('ls 5>/dev/null'), /output redirection of descriptor 5/);
    assert.match(refusal('cd sub | ls'), /cd inside a pipeline/);
    assert.match(refusal('cd -'), /cd - is not supported/);
    assert.match(refusal('cd --bogus x'), /cd accepts no options but -L and -P/);
  });

  it('refuses programs off the list, by path, and the never-allowed ones', () => {
    assert.match(refusal('curl example.com'), /not on the command allowlist.*extra_allowed_commands/);
    assert.match(refusal('/bin/ls'), /not given as a path/);
    assert.match(refusal('./run.sh'), /not given as a path/);
    assert.match(refusal('l? -la'), /wildcard/);
    for (const program of ['sudo ls', 'bash -c id', 'sh x', 'eval ls', 'exec ls', 'source x', '. x', 'xargs rm', 'env', 'shutdown now', 'mkfs /dev/sda', 'mount x y']) {
      assert.match(refusal(program), /never allowed/, program);
    }
  });

  it('refuses paths that leave the workspace', () => {
    assert.match(refusal('cat /etc/passwd'), /absolute paths are not allowed/);
    assert.match(refusal('cat ../../etc/passwd'), /escapes the workspace/);
    assert.match(refusal('grep --file=/etc/shadow x'), /absolute paths/);
    assert.match(refusal('tar -C/ -xf a.tar'), /absolute paths/);
    assert.match(refusal('cat ~/.ssh/id_rsa'), /"~" is not allowed/);
    assert.match(refusal('ls .*'), /could match ".."/);
    assert.equal(risk('diff /dev/null notes.md'), 'low');
  });

  it('refuses rm -r of everything and options that run other programs or follow links', () => {
    for (const command of ['rm -rf /', 'rm -fr *', 'rm -r .', 'rm -Rf ..', 'rm --recursive ./*', 'rm -rf ~']) {
      assert.match(refusal(command), /never allowed|not allowed/, command);
    }
    assert.equal(risk('rm -rf build'), 'high');
    assert.match(refusal("find . -exec cat '{}' ';'"), /find -exec/);
    assert.match(refusal('find -L .'), /follows symbolic links/);
    assert.match(refusal('grep -R secret .'), /grep -R/);
    assert.match(refusal('sort --compress-program=sh x'), /compress-program/);
    assert.match(refusal('git -c core.sshCommand=x fetch'), /git option/);
    assert.match(refusal('git clone --upload-pack=x repo'), /git option/);
    assert.match(refusal('tar --to-command=sh -xf a.tar'), /tar option/);
    assert.equal(risk('git commit -c HEAD'), 'medium');
    assert.equal(risk('git push -u origin main'), 'medium');
  });

  it('refuses copy, archive and ownership flags that follow symbolic links, also inside combined short flags (issue 23)', () => {
    // An uploaded tar held a link to ../../../switchboard.toml; `cp -rL` then copied the key in.
    const following = [
      'cp -L link out', 'cp -rL dir out', 'cp -RH dir out', 'cp -aL dir out', 'cp --dereference dir/link out', 'cp --deref -r dir out', 'cp -r --dereference=x dir out',
      'tar -h -cf all.tar .', 'tar -chf all.tar .', 'tar -czhf all.tgz dir', 'tar --dereference -cf all.tar .', 'tar --deref -cf a.tar .', 'tar chf all.tar .',
      'chown -RL me dir', 'chown -R -H me dir', 'chown --dereference me link', 'chgrp -LR staff dir', 'chgrp -HR staff dir',
      'rsync -aL src/ dst/', 'rsync -a --copy-links src/ dst/', 'rsync -a --copy-unsafe-links src/ dst/', 'rsync -rk src/ dst/',
      'zip -r all.zip .', 'zip -qr all.zip dir',
    ];
    for (const command of following) assert.match(refusal(command), /symbolic links/, command);
    for (const command of ['cp -r dir out', 'cp -a dir out', 'cp -P link out', 'tar -cf all.tar .', 'tar -xzf upload.tgz', 'tar cf all.tar .', 'tar -tvf a.tar', 'chown -R me dir', 'chown -h me link', 'chgrp -R staff dir', 'rsync -a src/ dst/', 'zip -ry all.zip .', 'zip -r --symlinks all.zip .', 'zip a.zip notes.md']) {
      assert.doesNotThrow(() => risk(command), command);
    }
  });

  it('uses allowed_commands as a replacement and extra_allowed_commands as medium additions', () => {
    const custom = createCommandPolicy({ allowedCommands: ['ls', 'rm', 'cowsay'], extraAllowedCommands: ['jq', 'printenv'] });
    assert.equal(risk('ls', custom), 'low');
    assert.equal(risk('rm x', custom), 'high');
    assert.equal(risk('cowsay hi', custom), 'medium');
    assert.equal(risk('printenv', custom), 'medium');
    assert.equal(risk('jq . x.json', custom), 'medium');
    assert.match(refusal('cat x', custom), /not on the command allowlist/);
  });

  it('rejects bad configuration eagerly, naming the key', () => {
    assert.throws(() => createCommandPolicy({ allowedCommands: ['sudo'] }), /allowed_commands: "sudo" can never be allowed/);
    assert.throws(() => createCommandPolicy({ extraAllowedCommands: ['/usr/bin/curl'] }), /extra_allowed_commands: .* is not a program name/);
    assert.throws(() => createCommandPolicy({ extraAllowedCommands: ['curl x'] }), /not a program name/);
  });
});
