// zerobook.perfmodel's predict_step and its collectives (NCCL's algorithms, protocols and
// choice, zerobook.perfmodel.collectives), line for line in JavaScript, for the book's static
// step explorer (no kernel, no network). Every sum is taken in the Python's order, so the
// numbers are the same doubles: tests/test_widgets.py runs both in Chromium, on a sample of the
// explorer's menus and on collectives of every kind, size and scale, and asserts equality. Left
// out (the explorer does not offer them): gradient buckets (bucket_params) and dtypes other than
// 16-bit. Keep it in step with zerobook/perfmodel.
(function () {
  // inputs.ALLOCATOR_MARGIN and inputs.LOGIT_BYTES (F.cross_entropy on fp32 logits, as measured)
  const OPTIMIZER_BYTES_PER_ELEMENT = 28, ALLOCATOR_MARGIN = 0.11, LOGIT_BYTES = 12, ELEMENT_BYTES = 2;
  const DTYPE_BYTES = {bf16: 2, fp16: 2, fp32: 4};  // inputs.ELEMENT_BYTES
  const GRAD_SYNC = {0: "last", 1: "last", 2: "every", 3: "every"};  // step.GRAD_SYNC

  // zerobook.perfmodel.models.ModelSpec: m has its fields (layers, hidden, heads, kv_heads, ...).
  const kvDim = (m) => Math.floor(m.hidden / m.heads) * m.kv_heads;
  const blockMatmulParams = (m) => 2 * m.hidden * m.hidden + 2 * m.hidden * kvDim(m) + (m.gated ? 3 : 2) * m.hidden * m.ffn;
  function blockParams(m) {
    const h = m.hidden;
    const biases = m.biases ? 2 * h + 2 * kvDim(m) + (m.gated ? 2 : 1) * m.ffn + h : 0;
    return blockMatmulParams(m) + biases + 2 * m.norm_params * h;
  }
  const rootParams = (m) => (m.tied ? 1 : 2) * m.vocab * m.hidden + m.positions * m.hidden + m.norm_params * m.hidden;
  const numParams = (m) => m.layers * blockParams(m) + rootParams(m);
  const lookupParams = (m) => (m.tied ? 0 : m.vocab * m.hidden) + m.positions * m.hidden;
  const flopsPerToken = (m, seq) => 6 * (numParams(m) - lookupParams(m)) + 12 * m.layers * m.hidden * seq;
  const blockForwardFlops = (m, tokens, seq) => 2 * blockMatmulParams(m) * tokens + 4 * m.hidden * seq * tokens;
  const rootForwardFlops = (m, tokens) => 2 * m.vocab * m.hidden * tokens;
  function blockActivationBytes(m, tokens, checkpointing) {
    const h = m.hidden, f = m.ffn;
    if (checkpointing === "full") return 2 * h * tokens;
    if (checkpointing === "matmul_inputs") return (2 * (3 * h + f) + 2 * h + 4 * kvDim(m)) * tokens;
    return (12 * h + 4 * kvDim(m) + 2 * (m.gated ? 4 : 2) * f) * tokens;
  }

  // zerobook.perfmodel.collectives: NCCL's algorithms, protocols and choice (tuning.cc).
  const US = 1e-6, CHANNELS = 16;
  const BASE_LATENCY = {tree: [6.8, 14.0, 8.4], ring: [6.6, 14.0, 8.4]};
  const HW_LATENCY = {
    nvlink: {tree: [0.6, 1.25, 4.0], ring: [0.6, 1.9, 3.4], collnet: [0, 0, 3.7], nvls: [0, 0, 25.0], nvls_tree: [0, 0, 25.0]},
    net: {tree: [5.0, 8.5, 14.0], ring: [2.7, 4.0, 14.0], collnet: [0, 0, 31.0], nvls: [0, 0, 18.0], nvls_tree: [0, 0, 20.9]},
  };
  const LL_MAX = {ampere: [87.7, 22.5, 19.0], hopper: [141.0, 39.0, 20.4]};
  const NET_OVERHEAD = {ampere: 2.0, hopper: 1.0}, NVLS_EFFICIENCY = {ampere: 0.0, hopper: 0.85};
  const TREE_CORRECTION = [
    [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0],
    [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9],
  ];
  function floorLog2(value) {
    let bits = -1;
    while (value >= 1) { value = Math.floor(value / 2); bits += 1; }
    return bits;
  }
  function linkBytes(kind, size, n, perNode, nicsPerGpu) {
    const k = Math.min(n, perNode), sent = (kind === "all_reduce" ? 2 : 1) * (n - 1) / n * size;
    if (n === k) return {nvlink: sent, nic: 0.0};
    return {nvlink: (1 - 1 / k) * sent, nic: sent / (k * nicsPerGpu)};
  }
  function ringBytesSeconds(kind, size, n, k, hw) {
    const sent = linkBytes(kind, size, n, k, hw.nics_per_node / hw.gpus_per_node);
    return Math.max(sent.nvlink / hw.intra_bandwidth, sent.nic / hw.nic_bandwidth);
  }
  const busBandwidth = (n, k, hw) => (n === 1 ? Infinity : (n - 1) / n / ringBytesSeconds("all_gather", 1.0, n, k, hw));
  function ring(kind, size, n, k, hw, p) {
    const nodes = Math.floor(n / k), gen = hw.generation;
    const nsteps = kind === "all_reduce" ? 2 * (n - 1) : n - 1;
    const inter = nodes === 1 ? 0 : kind === "all_reduce" ? 2 * (nodes - 1) : nodes - 1;
    const overhead = nodes === 1 ? 0.0 : NET_OVERHEAD[gen] * (p === 2 ? 3 : 1);
    const intraLat = Math.max(HW_LATENCY.nvlink.ring[p], overhead);
    const interLat = HW_LATENCY.net[k === 1 ? "tree" : "ring"][p];
    let lat = BASE_LATENCY.ring[p] + (nsteps - inter) * intraLat + inter * interLat;
    if (p === 2 && nodes > 1 && kind === "all_reduce" && size / (CHANNELS * n) >= 64) lat *= 1.4;
    let seconds = ringBytesSeconds(kind, size, n, k, hw);
    if (p === 1) {
      seconds /= 0.92;
    } else if (p === 0) {
      const bus = (kind === "all_reduce" ? 2 : 1) * (n - 1) / n * size / seconds;
      seconds *= bus / Math.min(LL_MAX[gen][Math.min(nodes, 3) - 1] * 1e9, 0.5 * bus);
    }
    return lat * US + seconds;
  }
  function tree(size, n, k, hw, p) {
    const nodes = Math.floor(n / k), gen = hw.generation;
    let bus = 0.92 * 2 * (n - 1) / n * size / ringBytesSeconds("all_reduce", size, n, k, hw);
    if (p === 0) bus = Math.min(bus / 3.8, LL_MAX[gen][Math.min(nodes, 3) - 1] * 1e9);
    else if (p === 1) bus *= nodes === 1 ? 7 / 9 : 120 / 128;
    const logSize = floorLog2(Math.floor(size / 64));
    if (logSize >= 0 && logSize < 23) bus *= TREE_CORRECTION[p][logSize];
    const interLat = HW_LATENCY.net.tree[p];
    const lat = BASE_LATENCY.tree[p] + 2 * ((k - 1) * HW_LATENCY.nvlink.tree[p] + floorLog2(nodes) * interLat);
    return lat * US + size / (0.5 * bus);
  }
  function inNetwork(size, n, k, hw) {
    const nodes = Math.floor(n / k), out = [];
    const nvls = NVLS_EFFICIENCY[hw.generation] * hw.intra_bandwidth * k / (k + 1);
    const egress = k * hw.nics_per_node / hw.gpus_per_node * hw.nic_bandwidth;
    if (hw.nvls && k > 1 && nodes === 1) out.push(HW_LATENCY.nvlink.nvls[2] * US + size / nvls);
    if (hw.nvls && k > 1 && nodes > 1) {
      const lat = HW_LATENCY.nvlink.nvls_tree[2] + 2 * floorLog2(nodes) * HW_LATENCY.net.nvls_tree[2];
      out.push(lat * US + size / Math.min(nvls, egress / 2));
    }
    if (hw.sharp && nodes > 1) {
      const inside = hw.nvls && k > 1 ? nvls : k > 1 ? hw.intra_bandwidth * k / (2 * (k - 1)) : Infinity;
      const lat = 2 * (Math.min(1, k - 1) * HW_LATENCY.nvlink.collnet[2] + (k - 1) * 0.4) + HW_LATENCY.net.collnet[2];
      out.push(lat * US + size / Math.min(inside, egress));
    }
    return out;
  }
  function collectiveSeconds(kind, size, n, perNode, hw) {
    const k = Math.min(n, perNode);
    if (n === 1 || size === 0) return 0.0;
    if (hw.generation === null) {  // a calibrated host: an alpha-beta ring
      const oneNode = n === k, alpha = oneNode ? hw.intra_alpha : hw.inter_alpha;
      const bandwidth = oneNode ? hw.intra_bandwidth : busBandwidth(n, k, hw);
      return (kind === "all_reduce" ? 2 : 1) * ((n - 1) * alpha + (n - 1) / n * size / bandwidth);
    }
    let options = [0, 1, 2].map((p) => ring(kind, size, n, k, hw, p));
    if (kind === "all_reduce") options = options.concat([0, 1, 2].map((p) => tree(size, n, k, hw, p)), inNetwork(size, n, k, hw));
    return options.reduce((best, s) => (s < best ? s : best));
  }

  // zerobook.perfmodel.schedule.Program
  function schedule(ops) {
    const queues = new Map();
    ops.forEach((op) => { if (!queues.has(op.stream)) queues.set(op.stream, []); queues.get(op.stream).push(op); });
    const free = new Map([...queues.keys()].map((s) => [s, 0.0]));
    while ([...queues.values()].some((q) => q.length)) {
      let progressed = false;
      for (const [stream, queue] of queues) {
        while (queue.length && queue[0].deps.every(([, d]) => d.start !== null)) {
          const op = queue.shift();
          op.start = Math.max(free.get(stream), ...op.deps.map(([kind, d]) => (kind === "end" ? d.start + d.seconds : d.start)));
          free.set(stream, op.start + op.seconds);
          progressed = true;
        }
      }
      if (!progressed) throw new Error("the step's operations wait on each other: a cycle in the program");
    }
    return ops.map((o) => ({stream: o.stream, what: o.what, unit: o.unit, start: o.start, end: o.start + o.seconds}))
      .sort((a, b) => a.start - b.start);
  }

  // step.grad_syncs: whether each micro-batch's backward reduces
  const gradSyncs = (stage, k, sync) => Array.from({length: k}, (_, i) => (sync || GRAD_SYNC[stage]) === "every" || i === k - 1);

  // zerobook.perfmodel.step.StepProgram, for stage 0-3, prefetch or not, HSDP (group < N), gradients
  // reduced in reduceBytes per element, micro-batches each reducing or not (syncs).
  function program(m, hw, layout, stage, t, prefetch, paramGather, reduceBytes, syncs) {
    const ops = [];
    const add = (stream, what, unit, seconds, ...deps) => {
      const op = {stream: hw.overlap ? stream : "compute", what, unit, seconds, deps, start: null};
      ops.push(op);
      return op;
    };
    const replicas = Math.floor(layout.n / layout.group);
    function group(kind) {  // zerobook.perfmodel.step.Layout.group
      if (kind === "all_reduce") return [layout.n, Math.min(layout.n, layout.perNode)];
      if (kind === "replicas") return [replicas, Math.max(1, Math.floor(layout.perNode / layout.group))];
      return [layout.group, Math.min(layout.group, layout.perNode)];
    }
    function seconds(kind, size) {
      const [ranks, perNode] = group(kind);
      kind = kind === "replicas" ? "all_reduce" : kind;
      let times = 1;
      if (kind === "reduce_scatter" && hw.reduce_scatter !== null) [kind, times] = ["all_reduce", hw.reduce_scatter];
      return times * collectiveSeconds(kind, size, ranks, perNode, hw);
    }
    function collective(kind, unit, params, ...deps) {
      const size = params * (kind === "all_gather" ? ELEMENT_BYTES : reduceBytes);
      let op = add("communication", kind.replace("_", "-"), unit, seconds(kind, size), ...deps);
      if (kind === "reduce_scatter" && replicas > 1) {
        // step.Layout.replica_stream: FSDP2's all_reduce_stream while the shard group is inside a node
        op = add(layout.group <= layout.perNode ? "replicas" : "communication", "all-reduce (replicas)", unit,
                 seconds("replicas", size / layout.group), ["end", op]);
      }
      return op;
    }
    const compute = (what, unit, seconds, ...deps) => add("compute", what, unit, seconds, ...deps);
    // StepProgram.ahead: stages 1-2 gathering the updated weights ahead of the next forward (Megatron)
    const ahead = (stage === 1 || stage === 2) && paramGather === "next_forward";
    const regather = (k, prev) => (stage !== 3 || k < 0 ? null
      : collective("all_gather", `blocks.${k}`, blockParams(m), [prefetch ? "start" : "end", prev]));
    const reduces = [], kind = stage === 0 ? "all_reduce" : "reduce_scatter";
    let last = null;
    syncs.forEach((sync, micro) => {
      // forward: a later micro-batch's first gathers issued when the last backward ends
      let previous = null;
      const start = last ? [["end", last]] : [], gathers = stage === 3 || (ahead && micro === 0);
      const gatherRoot = gathers ? collective("all_gather", "root", rootParams(m), ...start) : null;
      for (let k = 0; k < m.layers; k++) {
        const deps = previous ? [["end", previous]] : [];
        if (gathers) {
          const issue = previous === null ? start : [[prefetch || ahead ? "start" : "end", previous]];
          const gather = collective("all_gather", `blocks.${k}`, blockParams(m), ...issue);
          deps.push(["end", gather]);
          if (gatherRoot !== null && k === 0) deps.push(["end", gatherRoot]);
        }
        previous = compute("forward", `blocks.${k}`, t.block_forward, ...deps);
      }
      const lastForward = compute("forward", "root", t.root_forward, ["end", previous]);
      // backward
      previous = compute("backward", "root", t.root_backward, ["end", lastForward]);
      let gather = regather(m.layers - 1, previous);
      for (let k = m.layers - 1; k >= 0; k--) {
        const deps = [["end", previous]].concat(gather ? [["end", gather]] : []);
        previous = compute("backward", `blocks.${k}`, t.block_backward, ...deps);
        gather = prefetch ? regather(k - 1, previous) : null;
        if (sync) reduces.push(collective(kind, `blocks.${k}`, blockParams(m), ["end", previous]));
        if (!prefetch) gather = regather(k - 1, previous);
      }
      if (sync) reduces.push(collective(kind, "root", rootParams(m), ["end", previous]));
      last = previous;
    });
    const step = compute("optimizer step", "all", t.optimizer, ...reduces.map((r) => ["end", r]));
    if ((stage === 1 || stage === 2) && !ahead) collective("all_gather", "all", numParams(m), ["end", step]);
    return ops;
  }

  function stepTimes(m, hw, tokens, seq, checkpointing, shardElements) {
    const rate = hw.peak_flops * hw.sustained;
    const elementwise = tokens * m.hidden * hw.elementwise_bytes / hw.memory_bandwidth;
    const forward = blockForwardFlops(m, tokens, seq) / rate + elementwise, root = rootForwardFlops(m, tokens) / rate;
    const recompute = checkpointing === "full" ? forward : 0.0;
    return {block_forward: forward, block_backward: 2 * forward + recompute, root_forward: root,
            root_backward: 2 * root, optimizer: shardElements * OPTIMIZER_BYTES_PER_ELEMENT / hw.memory_bandwidth};
  }

  function peakMemory(m, stage, group, tokens, checkpointing, prefetch, accumulated, margin, logitBytes) {
    const psi = numParams(m), n = group;  // zerobook.accounting.memory.model_state_bytes, the ZeRO paper's 2 + 2 + 12
    const states = (stage >= 3 ? 2 / n : 2) * psi + (stage >= 2 ? 2 / n : 2) * psi + (stage >= 1 ? 12 / n : 12) * psi;
    const terms = {"model states": states, activations: m.layers * blockActivationBytes(m, tokens, checkpointing),
                   logits: tokens * m.vocab * logitBytes};
    if (checkpointing === "full") terms.activations += blockActivationBytes(m, tokens, null);
    if (stage === 3) terms["gathered units"] = 2 * (rootParams(m) + (prefetch ? 2 : 1) * blockParams(m));
    if (accumulated && stage >= 2) terms["accumulated gradients"] = accumulated * psi;
    terms["allocator margin"] = margin * Object.values(terms).reduce((a, b) => a + b, 0);
    return terms;
  }

  // predict_step(m, hw, {world_size, gpus_per_node, stage, micro_batch, seq_len,
  //                      activation_checkpointing, prefetch, shard_group, param_gather,
  //                      reduce_dtype, micro_batches, grad_sync, allocator_margin, logit_bytes}):
  //                      weights in bf16
  function predictStep(m, hw, o) {
    const group = o.shard_group || o.world_size, tokens = o.micro_batch * o.seq_len;
    const shard = numParams(m) / (o.stage ? group : 1);
    const t = stepTimes(m, hw, tokens, o.seq_len, o.activation_checkpointing, shard);
    const layout = {n: o.world_size, perNode: o.gpus_per_node, group};
    const k = o.micro_batches || 1, syncs = gradSyncs(o.stage, k, o.grad_sync);
    const timeline = schedule(program(m, hw, layout, o.stage, t, o.prefetch, o.param_gather || "after_step",
                                      DTYPE_BYTES[o.reduce_dtype || "bf16"], syncs));
    const memory = peakMemory(m, o.stage, group, tokens, o.activation_checkpointing, o.prefetch,
                              k > 1 && !syncs[0] ? DTYPE_BYTES[o.reduce_dtype || "bf16"] : 0,
                              o.allocator_margin ?? ALLOCATOR_MARGIN, o.logit_bytes ?? LOGIT_BYTES);
    const peak = Object.values(memory).reduce((a, b) => a + b, 0);
    const busy = {compute: 0.0, communication: 0.0};
    for (const s of timeline) {
      busy[["forward", "backward", "optimizer step"].includes(s.what) ? "compute" : "communication"] += s.end - s.start;
    }
    const step = Math.max(...timeline.map((s) => s.end));
    const mfu = flopsPerToken(m, o.seq_len) * (k * tokens) / (step * hw.peak_flops);
    return {compute_s: busy.compute, comm_s: busy.communication, exposed_comm_s: step - busy.compute, step_s: step,
            peak_memory_bytes: peak, memory, mfu, tokens_per_second: k * tokens / step, fits: peak <= hw.memory_bytes,
            timeline};
  }

  window.zerobook = Object.assign(window.zerobook || {}, {predictStep, numParams, collectiveSeconds});
})();
