// Package status is the fleet's reboot state as a person or a script reads it: the `kubectl slipway`
// plugin (binary kubectl-slipway) and `update-operator status|pause|resume` both run [Main].
//
// It needs nothing but read access to Nodes and to the slipway-fleet ConfigMap (package fleetswitch) in the
// operator's namespace: every fact comes from the Nodes themselves (protocol.Observe, Classify,
// StageSince, the operator's annotations) and from what the leading operator publishes in that
// ConfigMap: the policies it runs (key policies: budgets, windows, timeouts, compiled with
// policy.Compile as the operator compiles them) and its Status (key status: leader, version, fleet-wide
// blockers, failed reboots, cycle durations). So it works from any laptop with a kubeconfig, and it
// shows what any operator replica would derive: no controller internals, no second copy of the state.
// pause and resume flip the switch in the same ConfigMap (fleet.PausePatch, fleet.ResumePatch),
// creating it when missing.
//
// The budget is counted as the operator counts it, by the same function (admission.Pools over
// admission.Of): a node is unavailable when it is in its cycle, NotReady or cordoned, except one that
// stalled after its grant under --stall-policy=release; limits and the stall policy come from what the
// operator published (--max-unavailable, --max-unavailable-per-group, --max-unavailable-control-plane,
// --stall-policy).
//
// # Output
//
// The text output (default, -o text) is aligned columns for an 80-100 column terminal: the problems
// (see Problem), the fleet (pause switches, node counts per state, reboot windows, blockers, failed
// reboots, OS versions with their canary state and ETA, the measured cycles with --settle-time and
// --reboot-timeout, the leader), the budgets, then one row per node: NODE, STATE (with ",paused", and outside a
// cycle ",not-ready" and ",cordoned"), FOR (time in this stage; for idle nodes since the last reboot),
// GROUP, LAST-REBOOT and DETAIL: its place in the admission queue ("#2") and why it waits
// (blocked-by), why it is stalled or when it will be ("stalls in 12m"), "no update-agent", its last
// drain and reboot errors. DETAIL is cut to fit the terminal (else $COLUMNS, else 100); -o wide never
// cuts. The text layout may change between releases; scripts should read -o json.
//
// With --watch (-w) the report is written again every --interval (2s) until interrupted: text frames
// start with their time, after clearing the screen when stdout is a terminal; -o json writes one
// document per frame (a stream json.Decoder and jq read).
//
// # JSON (-o json)
//
// A stable shape, versioned by apiVersion: fields are only ever added within one version, every field
// below is always present (null or empty when unknown), times are RFC 3339 in UTC.
//
//	{
//	  "apiVersion": "status.slipway.dev/v1",
//	  "time": "2026-11-23T09:00:00Z",          // the instant the report describes
//	  "namespace": "slipway-system",           // where slipway-fleet was read
//	  "fleet": {
//	    "problems": [                          // what to look at first, most urgent first; [] none
//	      {"kind": "stalled",                  // record-unreadable, no-operator, no-leader, failures-paused,
//	                                           // version-halted, stalled, undrainable, paused, blocked,
//	                                           // no-agent (see Node.NoAgent)
//	       "node": "node-a",                   // "" for the fleet, or for several nodes (named in what)
//	       "what": "stalled: drain-failing",
//	       "do": "drain keeps failing: ..."}   // what to do or read
//	    ],
//	    "published": true,                     // the leading operator published its Status; when
//	                                           // false, limits and windows are unknown (null/false),
//	                                           // as they are without published policies (an older
//	                                           // operator: schedule.error says so)
//	    "leader": "update-operator-7c9d-x2",   // "" when not published
//	    "lease": {"holder": "update-operator-7c9d-x2", "renewed": "2026-11-23T08:59:58Z",
//	              "durationSeconds": 15, "live": true},  // Lease slipway-update-operator; null
//	                                           // when missing or not readable
//	    "paused": {"paused": true, "reason": "incident 42", "by": "alice", "at": "2026-11-23T08:00:00Z"},
//	    "pausedGroups": [{"group": "zone-b", "reason": "AZ maintenance"}],
//	    "groupLabel": "topology.kubernetes.io/zone",
//	    "budgets": [                           // "fleet" first, then "control-plane", then groups by name
//	      {"pool": "fleet", "group": "", "nodes": 5, "unavailable": 2, "max": "1", "limit": 1},
//	      {"pool": "group", "group": "zone-a", "nodes": 2, "unavailable": 1, "max": "1", "limit": 1}
//	    ],                                     // "max" as given ("" when not set), "limit" null then
//	    "schedule": {
//	      "windows": ["Mon-Fri 22:00-05:00 Europe/Berlin"],   // as given
//	      "exclusions": [],
//	      "known": true,                       // open/nextOpen computed; false: see "error"
//	      "open": false,
//	      "nextOpen": "2026-11-23T21:00:00Z",  // null when open now or none within 400 days
//	      "closedBy": "outside the reboot windows",
//	      "error": ""
//	    },
//	    "blockers": [{"name": "alerts", "reason": "NodeDown firing", "since": "2026-11-23T08:55:00Z"}],
//	    "failedReboots": {"nodes": ["node-c"], "max": 3},  // max 0: no failure budget
//	    "versions": [                          // every OS version a node runs or asks for, by name
//	      {"version": "4500.1.0", "on": 3, "inCycle": 1, "asking": 5, "failed": 0,
//	       "canary": "baking",                 // released, baking, canaries, waiting, halted; "" off
//	       "bakeEnd": "2026-11-23T09:10:00Z",  // null unless baking or released
//	       "resumed": null,                    // when a person last ran resume --version for it
//	       "etaSeconds": 2520}                 // until its asking and in-cycle nodes are through
//	                                           // (see ETA): null when none, halted, fleet paused,
//	                                           // or unknown (no cycle measured, no limit known)
//	    ],
//	    "rebootTimeout": "30m0s",              // --reboot-timeout, --settle-time as published
//	    "settleTime": "",                      // ("" none, or not published)
//	    "cycles": {"measured": 12,             // the last cycles that finished (at most 20)
//	               "medianSeconds": 840}       // null when none measured
//	  },
//	  "nodes": [                               // sorted by name
//	    {
//	      "name": "node-a",
//	      "state": "draining",                 // protocol.State: idle, needs-reboot, before-reboot,
//	                                           // draining, rebooting, rebooted, after-reboot
//	      "since": "2026-11-23T08:48:00Z",     // stage start; for idle the last reboot; else null
//	      "group": "zone-a",                   // budget group, "" for none
//	      "controlPlane": false,
//	      "paused": false,                     // reboot-paused holds this node
//	      "ready": true,
//	      "unschedulable": true,
//	      "unavailable": true,                 // counts against the budget
//	      "blockedBy": "",                     // update.slipway.dev/blocked-by: why it waits
//	      "stalled": "drain-failing",          // update.slipway.dev/stalled
//	      "drainError": "Cannot evict pod ...",
//	      "rebootError": "",
//	      "lastReboot": "2026-11-20T03:10:00Z", // update.slipway.dev/last-reboot-time, or null
//	      "waitingSince": null,                // update.slipway.dev/waiting-since, or null
//	      "undrainable": "",                   // update.slipway.dev/undrainable
//	      "stallHint": "drain keeps failing: ...", // what to look at for the stall; "" if none
//	      "queue": 0,                          // place in the admission queue from 1 (0: none)
//	      "stallsAt": null,                    // when it stalls if it stays in its stage; null when
//	                                           // stalled, out of a cycle, or no --reboot-timeout
//	      "noAgent": false                     // no agent ever wrote on it (see Node.NoAgent)
//	    }
//	  ]
//	}
package status
