package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
)

// A stopped or cut-off leader, on time. Raft's follower checks its
// leader on a timer drawn at random between HeartbeatTimeout and twice
// that, and a voter refuses a pre-vote while it still has a leader, so an
// election after a SIGSTOP waited for the later of two such timers:
// 1.16s median with 500ms, where the rule itself (hear nothing for
// HeartbeatTimeout, then elect) allows 0.5s.
//
// The stall watch applies the same rule without the random wait: every
// stallPoll a follower reads when it last heard from its leader, and once
// that is HeartbeatTimeout ago (plus its rank × crashStagger, so that
// the voters time out one after another and the last one finds the
// others leaderless instead of splitting the vote) it makes raft's
// follower loop look now, rather than at its next timer. Raft then finds
// the contact as old as it finds it at its own check and starts the
// election as it would have (pre-vote, terms and logs untouched). A
// leader that heartbeats (every tenth of HeartbeatTimeout) is never
// touched: a busy leader keeps the whole HeartbeatTimeout, and one that
// stalls longer has stepped down by itself anyway (its leader lease,
// LeaderLeaseTimeout ≤ HeartbeatTimeout, runs out on the same silence).

// stallPoll is how often a follower reads its last contact.
const stallPoll = 10 * time.Millisecond

// WatchStall is the stall watch with heartbeat timeout hb; it runs on
// every member, after SetRaft, until the detector's stop.
func (d *CrashDetector) WatchStall(hb time.Duration) {
	t := time.NewTicker(stallPoll)
	defer t.Stop()
	var poked raft.ServerID // the leader last given up on, once
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		r := d.raft.Load()
		if r.State() != raft.Follower {
			poked = ""
			continue
		}
		_, lid := r.LeaderWithID()
		if lid == "" || lid == poked {
			continue
		}
		silent := time.Since(r.LastContact())
		if silent < hb {
			continue
		}
		if rank := d.Rank(lid); rank < 0 || silent < hb+time.Duration(rank)*crashStagger {
			continue
		}
		poked = lid
		d.log.Info("heard nothing from the leader for the heartbeat timeout: raft checks now", "leader", lid, "silent", silent.Round(time.Millisecond))
		pokeFollower(r)
	}
}

// pokeFollower makes raft's follower loop run its heartbeat check now:
// raft does so when ReloadConfig lowers its heartbeat timeout, so the
// timeouts are raised by a nanosecond (the election timeout with the
// heartbeat's, which it may not be below) and set back. The check reads
// the timeout then, either value: the watch pokes only once the last
// contact is at least the full timeout old.
func pokeFollower(r *raft.Raft) {
	rc := r.ReloadableConfig()
	up := rc
	up.HeartbeatTimeout++
	up.ElectionTimeout++
	if r.ReloadConfig(up) == nil {
		r.ReloadConfig(rc)
	}
}
