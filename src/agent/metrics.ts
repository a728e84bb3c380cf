/** The agent's Prometheus metrics: one registry, so the CLI serves exactly these. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class AgentMetrics {
  readonly registry = new Registry();
  readonly pulls = new Counter({ name: 'prestage_agent_pulls_total', help: 'Image pulls by outcome', labelNames: ['outcome'] as const, registers: [this.registry] });
  readonly pulledBytes = new Counter({ name: 'prestage_agent_pulled_bytes_total', help: 'Uncompressed bytes of the images pulled, each image whole, from exact layer sizes (images of unknown size are not counted)', registers: [this.registry] });
  readonly pullSeconds = new Histogram({
    name: 'prestage_agent_pull_duration_seconds',
    help: 'Duration of successful image pulls',
    buckets: [0.5, 1, 5, 15, 60, 180, 600, 1800],
    registers: [this.registry],
  });
  readonly reconciles = new Counter({ name: 'prestage_agent_reconciles_total', help: 'Reconcile passes by outcome', labelNames: ['outcome'] as const, registers: [this.registry] });
  readonly setsDone = new Gauge({ name: 'prestage_agent_pinned_image_sets_done', help: 'Matching sets pulled and pinned at their desired generation', registers: [this.registry] });
  readonly setsFailed = new Gauge({ name: 'prestage_agent_pinned_image_sets_failed', help: 'Matching sets whose last attempt failed', registers: [this.registry] });
  readonly pinnedImages = new Gauge({ name: 'prestage_agent_pinned_images', help: 'Images in the pin drop-in', registers: [this.registry] });
}
