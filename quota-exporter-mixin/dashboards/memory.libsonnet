// Memory and RSS creep: RSS and working set against the limit with the predict_linear
// projection, glibc arenas, allocator, JVM heap against RSS, OOM kills.
local g = import '../lib/g.libsonnet';
local utils = import '../lib/utils.libsonnet';
local common = import 'common.libsonnet';

{
  new(c)::
    local d = common.new(c);
    local s = d.cgroupSel;
    local by = d.cgroupBy;
    local horizon = utils.seconds(c.memoryCreepHorizon);

    d.dashboard(
      'quota-memory.json',
      'Resident memory against the memory limit with its linear projection, glibc malloc arenas, the allocator, '
      + 'JVM heap against RSS, and OOM kills.',
      [
        common.row('Cgroups'),
        common.timeSeries(
          'Working set and RSS against the limit',
          'bytes',
          'Working set (usage minus inactive file cache, what the OOM killer and the kubelet look at), RSS, page cache, the '
          + 'memory limit (dashed) and the working set projected ' + c.memoryCreepHorizon + ' ahead by predict_linear '
          + 'over ' + c.memoryCreepLookback + '.',
          [
            common.workload('max by (%s) (quota_memory_working_set_bytes{%s})' % [by, s], '{{name}} working set'),
            common.workload('max by (%s) (quota_memory_rss_bytes{%s})' % [by, s], '{{name}} RSS'),
            common.workload('max by (%s) (quota_memory_cache_bytes{%s})' % [by, s], '{{name}} page cache'),
            common.workload('max by (%s) (predict_linear(quota_memory_working_set_bytes{%s}[%s], %d))' % [by, s, c.memoryCreepLookback, horizon], '{{name}} projected in ' + c.memoryCreepHorizon),
            common.workload('max by (%s) (cgroup:quota_memory_limit_bytes:binding{%s})' % [by, s], '{{name}} limit'),
          ],
        ) + common.limitsDashed,
        common.timeSeries(
          'OOM kills',
          'short',
          'Processes killed by the OOM killer in the cgroup per interval.',
          [common.workload('sum by (%s) (increase(quota_memory_oom_kills_total{%s}[$__rate_interval]))' % [by, s], '{{name}}')],
        ) + g.panel.timeSeries.fieldConfig.defaults.custom.withDrawStyle('bars'),
        common.timeSeries(
          'Working set / memory limit',
          'percentunit',
          "Working set against the memory limit that binds (its own or its pod's; what QuotaMemoryNearLimit "
          + 'compares); cgroups without a limit are absent.',
          [common.workload('max by (%s) (quota_memory_working_set_bytes{%s} / cgroup:quota_memory_limit_bytes:binding{%s})' % [by, s, s], '{{name}}')],
        ) + d.seriesDrillDown(['quota-cpu-throttling.json', 'quota-runtime-pauses.json']),
        common.timeSeries(
          'Memory pressure (PSI)',
          'percentunit',
          'Share of wall time in which some or all tasks of the cgroup waited for memory (reclaim, swap-in).',
          [
            common.workload('sum by (%s) (rate(quota_memory_pressure_waiting_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} some'),
            common.workload('sum by (%s) (rate(quota_memory_pressure_stalled_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} full'),
          ],
        ),

        common.row('Processes'),
        common.timeSeries(
          'Process RSS and its projection',
          'bytes',
          'Resident memory per process, its predict_linear projection ' + c.memoryCreepHorizon + ' ahead (from '
          + c.memoryCreepLookback + ' of history) and the cgroup memory limit (dashed). A steady climb that crosses the '
          + 'limit, summed over the cgroup, is what QuotaMemoryCreep alerts on.',
          [
            common.workload('quota_process_resident_bytes{%s}' % s, '{{name}} {{process}} RSS'),
            common.workload('predict_linear(quota_process_resident_bytes{%s}[%s], %d)' % [s, c.memoryCreepLookback, horizon], '{{name}} {{process}} projected in ' + c.memoryCreepHorizon),
            common.workload('max by (%s) (quota_memory_limit_bytes{%s} and %s quota_process_resident_bytes{%s})' % [by, s, d.cgroupJoin, s], '{{name}} limit'),
          ],
        ) + common.limitsDashed,
        common.timeSeries(
          'JVM heap against RSS',
          'bytes',
          'JVM heap max (-Xmx), committed and used, metaspace, and native memory (RSS minus committed heap). A heap '
          + 'growing towards its max is planned; flat heap with growing native memory points to malloc arenas, '
          + 'direct buffers or thread stacks (seed report: arenas).',
          [
            common.workload('quota_jvm_heap_max_bytes{%s}' % s, '{{name}} {{process}} heap max'),
            common.workload('quota_process_resident_bytes{%s, runtime="jvm"}' % s, '{{name}} {{process}} RSS'),
            common.workload('quota_jvm_heap_committed_bytes{%s}' % s, '{{name}} {{process}} heap committed'),
            common.workload('quota_jvm_heap_used_bytes{%s}' % s, '{{name}} {{process}} heap used'),
            common.workload('quota_jvm_metaspace_used_bytes{%s}' % s, '{{name}} {{process}} metaspace'),
            common.workload('quota_process_resident_bytes{%s, runtime="jvm"} - quota_jvm_heap_committed_bytes{%s}' % [s, s], '{{name}} {{process}} native (RSS - heap)'),
          ],
        ),
        common.timeSeries(
          'glibc malloc arenas',
          'short',
          'glibc arenas and arena heaps (64 MiB each on 64-bit) per process, with the arena limit '
          + '(M_ARENA_MAX, default 8 per host CPU). Seed report: many 64 MiB heaps drove RSS to the OOM killer.',
          [
            common.workload('quota_process_malloc_arenas{%s}' % s, '{{name}} {{process}} arenas'),
            common.workload('quota_process_malloc_heaps{%s}' % s, '{{name}} {{process}} heaps'),
            common.workload('quota_process_malloc_arena_limit{%s}' % s, '{{name}} {{process}} arena limit'),
          ],
        ) + common.limitsDashed,
        common.timeSeries(
          'Arena heaps resident share of RSS',
          'percentunit',
          "Share of each process's RSS resident in glibc arena heaps (non-main arenas), as "
          + 'process:quota_process_malloc_heap_resident_bytes:ratio; QuotaMallocArenaBloat fires above '
          + std.toString(c.mallocArenaResidentShare * 100) + '%. The bytes are in the Allocators table.',
          [
            common.workload('process:quota_process_malloc_heap_resident_bytes:ratio{%s}' % s, '{{name}} {{process}}'),
          ],
        ),
        common.table(
          'Allocators',
          'The malloc implementation each process uses (glibc, jemalloc, tcmalloc) and the share of its RSS in '
          + 'glibc arena heaps.',
          [
            common.labelColumn('max by (%s, process, allocator) (quota_process_allocator_info{%s})' % [by, s]),
            common.column('RSS', 'max by (%s, process) (quota_process_resident_bytes{%s})' % [by, s], 'bytes'),
            common.column('Arena heaps resident', 'max by (%s, process) (quota_process_malloc_heap_resident_bytes{%s})' % [by, s], 'bytes'),
            common.column('Arena heaps / RSS', 'max by (%s, process) (process:quota_process_malloc_heap_resident_bytes:ratio{%s})' % [by, s], 'percentunit'),
          ],
          'RSS',
        ),
      ],
    ),
}
