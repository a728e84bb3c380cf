import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { apiHost, formatReference, isRepositoryPath, isTag, parseReference } from './reference.js';

const D = `sha256:${'a'.repeat(64)}`;

describe('parseReference', () => {
  it.each([
    ['nginx', { registry: 'docker.io', repository: 'library/nginx' }],
    ['nginx:1.25', { registry: 'docker.io', repository: 'library/nginx', tag: '1.25' }],
    ['docker.io/bitnami/redis', { registry: 'docker.io', repository: 'bitnami/redis' }],
    ['index.docker.io/library/busybox', { registry: 'docker.io', repository: 'library/busybox' }],
    ['localhost/app', { registry: 'localhost', repository: 'app' }],
    ['localhost:5000/app:v1', { registry: 'localhost:5000', repository: 'app', tag: 'v1' }],
    ['127.0.0.1:5000/a/b/c/d:tag', { registry: '127.0.0.1:5000', repository: 'a/b/c/d', tag: 'tag' }],
    ['[::1]:5000/app', { registry: '[::1]:5000', repository: 'app' }],
    [`quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`, { registry: 'quay.io', repository: 'openshift-release-dev/ocp-v4.0-art-dev', digest: D }],
    [`quay.io/org/app:1.0@${D}`, { registry: 'quay.io', repository: 'org/app', tag: '1.0', digest: D }],
  ])('normalises %s', (input, expected) => {
    expect(parseReference(input)).toEqual(expected);
  });

  it.each([
    ['', 'empty'],
    ['Quay.io/Upper/Case', 'lowercase'],
    ['quay.io/app@sha256:abc', 'digest'],
    ['quay.io/app:bad tag', 'whitespace'],
    ['quay.io//app', 'empty repository'],
    ['quay.io/app:-leading', 'tag'],
  ])('rejects %j with a message naming the problem', (input, why) => {
    expect(() => parseReference(input)).toThrow(BadInputError);
    expect(() => parseReference(input)).toThrow(why);
  });

  it('formats back to the canonical form', () => {
    expect(formatReference(parseReference('nginx:1'))).toBe('docker.io/library/nginx:1');
  });

  it('talks to registry-1.docker.io for Docker Hub', () => {
    expect(apiHost('docker.io')).toBe('registry-1.docker.io');
    expect(apiHost('quay.io')).toBe('quay.io');
  });
});

describe('isTag and isRepositoryPath: names read from files, never paths', () => {
  it('accepts the distribution grammar', () => {
    for (const tag of ['4.16.3-x86_64', 'latest', '_x', 'sha256-' + 'a'.repeat(64) + '.sig', 'A'.repeat(128)]) expect(isTag(tag), tag).toBe(true);
    for (const repo of ['ocp', 'openshift-release-dev/ocp-v4.0-art-dev', 'a__b/c.d/e---f', 'x'.repeat(255)]) expect(isRepositoryPath(repo), repo).toBe(true);
  });

  it('refuses traversal, separators, empty parts, case, length and non-strings', () => {
    for (const tag of ['', '..', '../x', '.x', '-x', 'a/b', 'a\nb', 'a:b', 'A'.repeat(129), '../../../../tenant-b/x', 4]) expect(isTag(tag), String(tag)).toBe(false);
    for (const repo of ['', '..', 'a/../b', '/a', 'a/', 'a//b', 'A/b', 'a b', 'a/./b', '-a', 'x'.repeat(256), null]) expect(isRepositoryPath(repo), String(repo)).toBe(false);
  });
});
