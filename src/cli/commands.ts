/**
 * What `--help`, completion and unknown input need to know about each command, without
 * loading it: a command's module pulls in the registry client, the Kubernetes client or gRPC
 * (up to ~0.8 s). Only the command a user names is loaded.
 */
import type { CommandModule } from 'yargs';
import type { CommandContext } from './context.js';
import type { ExitCodes } from './help.js';

/** A command module's builder and handler; usage, description and examples come from here. */
export type CommandFactory = (ctx: CommandContext, scriptName: string) => CommandModule;

export interface CommandDescriptor {
  /** yargs usage: the name and its positionals. */
  readonly usage: string;
  readonly describe: string;
  /** `[command line, what it does]`; `$0` is the script name. */
  readonly examples: ReadonlyArray<readonly [string, string]>;
  readonly load: () => Promise<CommandFactory>;
  /**
   * A run of seconds, mostly waiting on registries: V8 stops at its baseline compiler, as
   * TurboFan's compiles (on background threads, counted in the process's CPU) cost such a run
   * more than its optimized code saves it: a plan of the fixture release, about a sixth of its
   * CPU (`npm run bench:plan`). Long-running commands (agent, wait, stage, bundle) keep it.
   */
  readonly brief?: boolean;
  /**
   * Flags that make a brief command CPU-bound: a plan reading operator catalogs parses hundreds of
   * MB of documents, 4.5x slower at the baseline tier (`npm run bench:operators`: 39.3 s against
   * 8.7 s on a Red Hat-scale catalog).
   */
  readonly notBriefWith?: readonly string[];
  /** Its own commands (`bundle create`): a flag error points at the one named. */
  readonly subcommands?: readonly string[];
  /** The page of docs/ that walks through it; its help ends by naming it. */
  readonly docs: string;
  /** The exit codes it can give beyond 0, 2, 70 and 74 (help.ts), with what they mean for it. */
  readonly exitCodes: ExitCodes;
}

const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';

export const COMMANDS: Readonly<Record<string, CommandDescriptor>> = {
  plan: {
    usage: 'plan [release]',
    docs: 'planning.md',
    exitCodes: [3, [4, 'Kubernetes API failure or refusal (--kubeconfig, --context, --to)']],
    describe: 'Read an OpenShift release image and plan control-plane and worker PinnedImageSets',
    examples: [
      [`$0 plan ${RELEASE} --registry-config pull-secret.json`, 'Show the sets and their exact sizes'],
      [`$0 plan ${RELEASE} -o yaml > pinned-image-sets.yaml`, 'Write the PinnedImageSet manifests'],
      [`$0 plan ${RELEASE} --output-dir gitops/prestage`, 'One file per set plus kustomization.yaml'],
      [`$0 plan ${RELEASE} -o yaml --api mco-v1alpha1`, 'Manifests for OpenShift 4.16-4.18 (TechPreviewNoUpgrade)'],
      [`$0 plan ${RELEASE} --mirror quay.io/openshift-release-dev=mirror.example.com:5000/ocp --ca-file mirror-ca.pem`, 'Read from a disconnected mirror'],
      ['$0 plan --to 4.16.3 --kubeconfig admin.kubeconfig', 'Plan the update the cluster offers to 4.16.3'],
      ['$0 plan --from 4.16.3 --to 4.18.2 --channel eus-4.18 --graph https://api.openshift.com/api/upgrades_info/v1/graph', 'Plan every hop of the path the CVO will take, and what a node holds for them all'],
    ],
    load: async () => (await import('./plan.js')).planCommand,
    brief: true,
    notBriefWith: ['--config', '--catalog'],
  },
  bundle: {
    usage: 'bundle <command>',
    docs: 'air-gapped-bundles.md',
    exitCodes: [3],
    describe: 'Air-gapped bundles: create on a connected machine, verify and push into a mirror registry on the other side',
    examples: [
      [`$0 bundle create ${RELEASE} --output-dir /media/usb/ocp-4.16.3 --max-archive-size 4G`, 'Write every image the plan needs, also as 4 GiB tar parts'],
      ['$0 bundle verify /media/usb/ocp-4.16.3', 'Re-hash every blob on the other side'],
      ['$0 bundle push /media/usb/ocp-4.16.3 mirror.example.com:5000/ocp', 'Load the mirror; write mapping.txt and an ImageDigestMirrorSet'],
    ],
    load: async () => (await import('./bundle.js')).bundleCommand,
    subcommands: ['create', 'verify', 'push'],
  },
  install: {
    usage: 'install',
    docs: 'node-agent.md',
    exitCodes: [3, [4, 'Kubernetes API failure or refusal (--apply)']],
    describe: 'Render or apply the prestage CRDs, RBAC, admission policy and node agent DaemonSet',
    examples: [
      ['$0 install --image registry.example.com/prestage:0.1.0 > prestage-agent.yaml', 'Render the manifests for review or GitOps'],
      ['$0 install --image registry.example.com/prestage:0.1.0 --apply', 'Apply them server-side (SCC on OpenShift)'],
    ],
    load: async () => (await import('./install.js')).installCommand,
  },
  image: {
    usage: 'image <command>',
    docs: 'node-agent.md',
    exitCodes: [3],
    describe: "Build the agent image and push it: prestage's layer (the npm package on a Node.js base, or with --executable the single executable on a base without Node.js), for every platform the base offers",
    examples: [
      ['$0 image push registry.example.com/prestage:0.1.0', 'On node:20-bookworm-slim (every platform it offers)'],
      ['$0 image push mirror.example.com:5000/prestage:0.1.0 --base mirror.example.com:5000/node:20-bookworm-slim', 'On a mirrored base'],
      ['$0 image push registry.example.com/prestage:0.1.0 --executable dist-bin', 'The single executables (npm run dist) on debian:bookworm-slim, no Node.js in the image'],
    ],
    load: async () => (await import('./image.js')).imageCommand,
    subcommands: ['push'],
  },
  apply: {
    usage: 'apply <source>',
    docs: 'staging-with-mco.md',
    exitCodes: [3, 4],
    describe: 'Apply PinnedImageSets from a plan (plan -o json), a directory of manifests, or a release pullspec',
    examples: [
      ['$0 apply plan.json --dry-run server', 'Show what would change on the cluster, change nothing'],
      ['$0 apply gitops/prestage', 'Apply the manifests `plan --output-dir` wrote'],
    ],
    load: async () => (await import('./apply.js')).applyCommand,
  },
  wait: {
    usage: 'wait [sets..]',
    docs: 'staging-with-mco.md',
    exitCodes: [1, 4, 124],
    describe: 'Wait until every target node has pulled and pinned the sets (default: all prestage sets)',
    examples: [
      ['$0 wait --timeout 2h --fail-after 15m', 'Wait for every prestage set'],
      ['$0 wait prestage-4.16.3-worker -o json', 'One JSON event per line for one set'],
    ],
    load: async () => (await import('./wait.js')).waitCommand,
  },
  status: {
    usage: 'status [sets..]',
    docs: 'staging-with-mco.md',
    exitCodes: [[1, 'NOT READY (--release)'], 4],
    describe: 'Show each node × set: generation, state and error (default: all prestage sets)',
    examples: [
      ['$0 status', 'Every prestage set on every target node'],
      ['$0 status prestage-4.16.3-worker -o json', 'One set, as JSON'],
      ['$0 status --release 4.16.3', 'The sets of one release, then READY (exit 0) or NOT READY (exit 1)'],
    ],
    load: async () => (await import('./status.js')).statusCommand,
  },
  preflight: {
    usage: 'preflight [release]',
    docs: 'preflight.md',
    exitCodes: [[1, 'NO-GO: a node lacks the room, or staging does not fit its window'], 3, 4],
    describe: 'Before the window: per node and set what is stored, still to fetch and to write, the room by the backend\'s own rule, and the ETA against --window; GO or NO-GO',
    examples: [
      ['$0 preflight --to 4.16.3 --link-rate 20MiB/s --window 22:00-06:00', 'Will staging the update fit tonight\'s window, and every node\'s disk?'],
      ['$0 preflight -o json', 'The prestage sets on the cluster now: what each node still lacks'],
    ],
    load: async () => (await import('./preflight.js')).preflightCommand,
  },
  report: {
    usage: 'report [sets..]',
    docs: 'preflight.md',
    exitCodes: [3, 4, [74, 'the --html file cannot be written']],
    describe: 'A staging report a person reads at a glance: nodes x sets with state and bytes, the preflight verdict, the link against its cap, errors named; --html FILE writes one self-contained page',
    examples: [
      ['$0 report --html staging.html', 'One file for the change ticket: opens offline, on a phone, printed'],
      ['$0 report --events wait.jsonl -o json', 'The same numbers, the link drawn from wait -o json events'],
    ],
    load: async () => (await import('./report.js')).reportCommand,
  },
  ready: {
    usage: 'ready <release-version..>',
    docs: 'upgrade-lifecycle.md',
    exitCodes: [[1, 'NOT READY: a set is missing or not current on a node'], 4],
    describe: 'Exit 0 when every set of the release is current on every node it targets, else 1 naming what is missing',
    examples: [
      ['$0 ready 4.16.3 && oc adm upgrade --to 4.16.3', 'Start the upgrade only once its images are on every node'],
      ['$0 ready 4.16.8 4.17.5 4.18.2', 'Every hop of a staged path, one line each'],
    ],
    load: async () => (await import('./status.js')).readyCommand,
  },
  verify: {
    usage: 'verify <release-version>',
    docs: 'upgrade-lifecycle.md',
    exitCodes: [[1, 'NOT VERIFIED: an image is missing or not pinned on a node'], 4, [124, 'a targeted node did not answer']],
    describe: "Check by CRI, per node, that every image of the release's sets is present and pinned on every node they target (exit 0 VERIFIED, 1 NOT VERIFIED naming node and images, 124 nodes did not answer)",
    examples: [
      ['$0 verify 4.16.3', "Every node's agent lists its runtime's images now and answers; VERIFIED or NOT VERIFIED"],
      ['$0 verify 4.16.3 --cri-socket /var/run/crio/crio.sock', "On a node (also under MCO): this node's sets against its CRI-O"],
    ],
    load: async () => (await import('./verify.js')).verifyCommand,
  },
  prune: {
    usage: 'prune',
    docs: 'upgrade-lifecycle.md',
    exitCodes: [4],
    describe: 'Delete the prestage sets of releases older than the one the cluster runs (once its upgrade is Completed)',
    examples: [
      ['$0 prune --dry-run', 'List the sets and the bytes each node may free'],
      ['$0 prune', 'Delete them: the images are unpinned and left to the kubelet\'s image GC'],
    ],
    load: async () => (await import('./prune.js')).pruneCommand,
  },
  pause: {
    usage: 'pause [sets..]',
    docs: 'link-etiquette.md',
    exitCodes: [4],
    describe: 'Pause staging of sets (default: every prestage set): no new pulls start; on MCO the pools stop selecting them until resume',
    examples: [
      ['$0 pause prestage-4.16.3-worker', 'Start no new pulls for one set; pulls under way finish'],
      ['$0 pause --dry-run', 'Show what pausing every prestage set would do; change nothing'],
    ],
    load: async () => (await import('./pause.js')).pauseCommand,
  },
  resume: {
    usage: 'resume [sets..]',
    docs: 'link-etiquette.md',
    exitCodes: [4],
    describe: 'Resume staging of paused sets (default: every paused prestage set)',
    examples: [
      ['$0 resume prestage-4.16.3-worker', 'Let one paused set pull again'],
      ['$0 resume', 'Resume every paused prestage set'],
    ],
    load: async () => (await import('./pause.js')).resumeCommand,
  },
  stage: {
    usage: 'stage [release]',
    docs: 'staging-with-mco.md',
    exitCodes: [1, 3, 4, 124],
    describe: 'Plan a release, apply its PinnedImageSets and wait until every node has them',
    examples: [
      [`$0 stage ${RELEASE} --registry-config pull-secret.json --timeout 3h`, 'Plan, check node disks, apply and wait'],
      ['$0 stage --to 4.16.3 --prune', 'The update the cluster offers; then delete the sets of older releases'],
      ['$0 stage --to 4.18.2 --channel eus-4.18 --control-plane-only-update', 'Every hop of a Control Plane Only update from the release the cluster runs, over the graph its ClusterVersion names'],
      ['$0 stage --to 4.16.3 --link-rate 20MiB/s --window 22:00-06:00 --window-tz Europe/Paris', 'Share the slow link: at most 20 MiB/s over it, pulls only at night'],
    ],
    load: async () => (await import('./stage.js')).stageCommand,
  },
  agent: {
    usage: 'agent',
    docs: 'node-agent.md',
    exitCodes: [[1, 'a set failed on this node (--once)'], 3, 4],
    describe: 'Run the node agent: pull and pin the PinnedImageSets that select this node',
    examples: [['$0 agent --node-name worker-0 --once', 'One reconcile pass on this node, then exit']],
    load: async () => (await import('./agent.js')).agentCommand,
  },
  docs: {
    usage: 'docs [topic]',
    docs: 'architecture.md',
    exitCodes: [],
    describe: 'Show a page of the documentation (the executable carries them), or the list of pages',
    examples: [
      ['$0 docs', 'The pages'],
      ['$0 docs air-gapped-bundles | less', 'Read one'],
    ],
    load: async () => (await import('./docs.js')).docsCommand,
    brief: true,
  },
  version: {
    usage: 'version',
    docs: 'install.md',
    exitCodes: [],
    describe: 'Print the version, the commit it was built from, the Node.js version and the target',
    examples: [['$0 version -o json', 'For scripts and bug reports']],
    load: async () => (await import('./version.js')).versionCommand,
    brief: true,
  },
};
