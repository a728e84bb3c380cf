/**
 * `prestage verify VERSION`: is every image of every set of the release present AND pinned on
 * every node it targets, as each node's container runtime (CRI) says now?
 *
 * - `--cri-socket PATH` (on a node, or in a debug pod with the host's socket): this node's sets
 *   (those of the release that target it, as the backend selects nodes: the agent's
 *   nodeSelector, MCO's pools), checked with CRI ListImages here. Works on either backend.
 * - Otherwise (agent backend): the release's sets are stamped with a fresh
 *   `prestage.dev/verify-requested`; every agent they select answers with its own ListImages in
 *   its NodePinnedImages `status.verified`, and verify waits (watch) for every targeted node's
 *   answer to THIS request. MCO's daemon makes no per-image check to ask for: run
 *   `--cri-socket` on the node.
 */
import { existsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Argv } from 'yargs';
import { parseReleaseVersion } from '../cluster/release-lifecycle.js';
import { BadInputError } from '../errors.js';
import { renderVerifyTable, verifyVerdict, type NodeCheck } from '../verify/verdict.js';
import { askAgents, checkThisNode, DEFAULT_CRI_SOCKET, releaseSets } from '../verify/agents.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { positiveSeconds } from './flag-values.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { renderDocument } from './documents.js';

const VERIFY_OUTPUT_HELP = 'Output format: json, yaml: one object {release, verified, nodes[] (node, role, sets[]: name, images, missingCount, missing, unpinnedCount, unpinned), untargeted[]}; the verdict is the exit code, NOT VERIFIED also a line on stderr [default: the table and the verdict line]';

export function verifyCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withKubeOptions(
        y
          .positional('release-version', { type: 'string', demandOption: true, coerce: parseReleaseVersion('VERSION'), describe: 'Release version, e.g. 4.16.3' })
          .option('cri-socket', {
            type: 'string',
            describe: `Check THIS node through its runtime's socket (e.g. ${DEFAULT_CRI_SOCKET}), on either backend; without it every agent is asked to check its node`,
          })
          .option('node-name', { type: 'string', describe: 'With --cri-socket: this node as the cluster names it (default: the hostname)' })
          .option('timeout', { type: 'string', default: 120, coerce: positiveSeconds('timeout'), describe: 'How long (120s, 5m; bare: seconds) to wait for every targeted node to answer (agent backend)' })
          .option('output', { alias: 'o', choices: ['json', 'yaml'] as const, describe: VERIFY_OUTPUT_HELP })
          .check((argv) => {
            if (argv['node-name'] !== undefined && argv['cri-socket'] === undefined) throw new BadInputError(`--node-name names the node --cri-socket checks; pass --cri-socket ${DEFAULT_CRI_SOCKET} too, or neither to ask every node's agent`);
            return true;
          }),
      ),
    handler: async (args) => {
      const version = args['release-version'] as string;
      const socket = args['cri-socket'] as string | undefined;
      if (socket !== undefined) checkSocketPath(socket);
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      if (socket === undefined && backend.kind === 'mco') {
        throw new BadInputError(
          `verify ${version}: on MCO, the machine-config-daemon reports per set and node only (MachineConfigNode), no per-image CRI check to ask for; run '${scriptName} verify ${version} --cri-socket ${DEFAULT_CRI_SOCKET}' on each node (e.g. in a debug pod with the host's socket)`,
        );
      }
      const sets = await releaseSets(client, backend, version);
      if (!sets.length) throw new BadInputError(`verify ${version}: no prestage set of release ${version} on the cluster, so nothing to verify; stage it first (${scriptName} stage --to ${version})`);
      const untargeted = sets.filter((set) => !set.nodes.length).map((set) => set.name);
      let checks: NodeCheck[];
      if (socket !== undefined) {
        checks = [await checkThisNode(client, sets, socket, (args['node-name'] as string | undefined) ?? hostname(), version)];
      } else {
        // The partial tables are progress: on stderr when stdout carries a document.
        const progress = args.output === undefined ? ctx.stdout : ctx.stderr;
        checks = await askAgents(client, sets, version, scriptName, (args.timeout as number) * 1000, (answered) => progress.write(`${renderVerifyTable(answered)}\n\n`));
      }
      const unanswered = socket === undefined ? untargeted : [];
      if (args.output !== undefined) {
        // The document first, whatever the verdict; NOT VERIFIED is then the error line and exit 1.
        let verified = true;
        try {
          verifyVerdict(version, checks, unanswered);
        } catch {
          verified = false;
        }
        ctx.stdout.write(renderDocument(args.output, { release: version, verified, nodes: checks, untargeted: unanswered }));
        verifyVerdict(version, checks, unanswered);
        return;
      }
      ctx.stdout.write(`${renderVerifyTable(checks)}\n\n`);
      ctx.stdout.write(`${verifyVerdict(version, checks, unanswered)}\n`);
    },
  });
}

/** A socket path that is not there is bad input (the runtime being down is a cluster error, later). */
function checkSocketPath(path: string): void {
  if (!existsSync(path)) throw new BadInputError(`--cri-socket ${path}: no such file; name the container runtime's socket on this node (CRI-O: ${DEFAULT_CRI_SOCKET})`);
  if (!statSync(path).isSocket()) throw new BadInputError(`--cri-socket ${path}: not a socket; name the container runtime's socket on this node (CRI-O: ${DEFAULT_CRI_SOCKET})`);
}
