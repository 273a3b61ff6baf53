"""The client against real latchd members.

Run by client/python's Go test (TestPythonClient), which starts three
members with TLS and client certificates and sets:
  LATCH_TEST_API      the members' API addresses, comma-separated
  LATCH_TEST_CA       the CA the members' certificates chain to
  LATCH_TEST_CERT/KEY this client's certificate
  LATCH_TEST_CONTROL  http://host:port of the test's control endpoint:
                      POST /kill-leader, POST /restart
Without LATCH_TEST_API these tests skip.
"""

import json
import os
import sys
import threading
import time
import unittest
import urllib.request
import uuid

import latch

ENV = os.environ.get("LATCH_TEST_API")


def setUpModule():
    if not ENV:
        raise unittest.SkipTest("LATCH_TEST_API not set: run through `go test ./client/python`")
    print("cluster tests ran against %s" % ENV, file=sys.stderr)


def new_client(members=None, timeout=30.0):
    return latch.Client(members or ENV.split(","), ca=os.environ.get("LATCH_TEST_CA"),
                        cert=os.environ.get("LATCH_TEST_CERT"), key=os.environ.get("LATCH_TEST_KEY"),
                        timeout=timeout)


def control(action):
    url = os.environ.get("LATCH_TEST_CONTROL")
    if not url:
        raise unittest.SkipTest("LATCH_TEST_CONTROL not set: no way to kill a member")
    req = urllib.request.Request(url + "/" + action, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


def until(what, cond, timeout=30.0):
    """Polls cond until it is true, failing after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("not reached within %ss: %s" % (timeout, what))
        time.sleep(0.02)  # polling a condition with a deadline


class Base(unittest.TestCase):
    def setUp(self):
        self.c = new_client()
        self.root = "/t-" + uuid.uuid4().hex[:8]
        self.c.create(self.root)

    def tearDown(self):
        self.c.close()


class Nodes(Base):
    def test_create_get_set_delete(self):
        p = self.root + "/config"
        self.assertEqual(self.c.create(p, b"v1"), p)
        with self.assertRaises(latch.NodeExists) as cm:
            self.c.create(p, b"again")
        self.assertEqual((cm.exception.code, cm.exception.status), (2, 409))
        data, st = self.c.get(p)
        self.assertEqual((data, st.version), (b"v1", 0))
        with self.assertRaises(latch.BadVersion):
            self.c.set(p, b"v2", version=5)
        st2 = self.c.set(p, b"\xff\x00binary", version=0)
        self.assertEqual(st2.version, 1)
        self.assertGreater(st2.mod_revision, st.mod_revision)
        self.assertEqual(self.c.get(p)[0], b"\xff\x00binary")
        until("a stale read sees the set", lambda: self.c.get(p, stale=True)[0] == b"\xff\x00binary")
        self.assertEqual(self.c.stat(p).data_length, 8)
        with self.assertRaises(latch.BadVersion):
            self.c.delete(p, version=0)
        self.c.delete(p, version=1)
        self.assertIsNone(self.c.exists(p))
        with self.assertRaises(latch.NoNode) as cm:
            self.c.get(p)
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(latch.NoNode):
            self.c.create(self.root + "/no/parent")

    def test_children_paged(self):
        names = ["c%02d" % i for i in range(7)]
        for n in names:
            self.c.create(self.root + "/" + n)
        page, nxt = self.c.children_page(self.root, limit=3)
        self.assertEqual((page, nxt), (names[:3], "c02"))
        page, nxt = self.c.children_page(self.root, after=nxt, limit=3)
        self.assertEqual(page, names[3:6])
        self.assertEqual(self.c.children(self.root, page=2), names)
        self.assertEqual(self.c.stat(self.root).num_children, 7)

    def test_multi(self):
        a, b = self.root + "/a", self.root + "/b"
        res = self.c.multi([latch.Op.create(a, b"1"), latch.Op.create(self.root + "/s-", sequential=True),
                            latch.Op.check(self.root, 0)])
        self.assertEqual(res[0].path, a)
        self.assertTrue(res[1].path.startswith(self.root + "/s-00"), res[1].path)
        with self.assertRaises(latch.BadVersion) as cm:
            self.c.multi([latch.Op.create(b), latch.Op.set(a, b"2", version=9)])
        self.assertEqual(len(cm.exception.body["results"]), 2)
        self.assertIsNone(self.c.exists(b), "a failed multi applied an op")
        self.c.multi([latch.Op.set(a, b"2", version=0), latch.Op.delete(a, version=1)])
        self.assertIsNone(self.c.exists(a))

    def test_ephemeral_sequential_with_session(self):
        s = self.c.session(ttl=5)
        first = s.create(self.root + "/w-", b"me", sequential=True)
        second = s.create(self.root + "/w-", b"me", sequential=True)
        self.assertTrue(first < second and first.startswith(self.root + "/w-"), (first, second))
        self.assertEqual(self.c.stat(first).ephemeral_owner, s.id)
        with self.assertRaises(latch.LatchError):
            self.c.create(self.root + "/e", ephemeral=True)  # no session
        s.close()
        self.assertTrue(s.lost.is_set())
        until("ephemerals gone with their session", lambda: self.c.exists(first) is None and self.c.exists(second) is None)


class Sessions(Base):
    def test_lost_signal(self):
        s = self.c.session(ttl=3)
        seen = []
        s.on_lost(seen.append)
        # Someone ends the session behind its back (as an expiry would).
        self.c._t.request("DELETE", "/api/v1/sessions/%d" % s.id, token=s.token)
        self.assertTrue(s.lost.wait(10), "lost not signalled")
        self.assertEqual(len(seen), 1)
        self.assertIsInstance(s.error, (latch.SessionExpired, latch.UnknownSession))
        s.close()

    def test_keepalive_outlives_ttl(self):
        with self.c.session(ttl=2) as s:
            p = s.create(self.root + "/alive")
            self.assertFalse(s.lost.wait(5), "the session was lost though it was renewed")
            self.assertIsNotNone(self.c.exists(p))


class Locks(Base):
    def test_exclusive_fenced_and_handed_over(self):
        p = self.root + "/job"
        with self.c.lock(p, ttl=5, timeout=10) as a:
            self.assertTrue(a.held)
            self.assertGreater(a.fencing_token, 0)
            self.assertIsNone(self.c.try_lock(p, ttl=5), "a second holder of an exclusive lock")
            with self.assertRaises(latch.Timeout):
                self.c.lock(p, ttl=5, timeout=0.3).acquire()
            got = {}

            def waiter():
                with self.c.lock(p, ttl=5, timeout=20) as b:
                    got["token"] = b.fencing_token
            t = threading.Thread(target=waiter)
            t.start()
            until("the waiter queued", lambda: len(self.c.lock_queue(p)) == 2)
            first = a.fencing_token
        t.join(30)
        self.assertFalse(t.is_alive())
        self.assertGreater(got["token"], first)
        self.assertFalse(a.lost.is_set(), "a released lock reported lost")
        until("queue empty", lambda: self.c.lock_queue(p) == [])

    def test_renewed_while_held(self):
        lk = self.c.lock(self.root + "/long", ttl=2, timeout=5)
        with lk:
            self.assertFalse(lk.lost.wait(5), "a renewed lock was lost: %s" % lk.error)
            q = self.c.lock_queue(self.root + "/long")
            # Held by its node (an expired hold leaves a lock-delay entry
            # with the same token and no node).
            self.assertEqual([(x["granted"], x.get("node"), x["fencing_token"]) for x in q],
                             [(True, lk.node, lk.fencing_token)])

    def test_shared(self):
        p = self.root + "/reports"
        r1 = self.c.try_lock(p, ttl=5, shared=True)
        r2 = self.c.try_lock(p, ttl=5, shared=True)
        self.assertIsNotNone(r1)
        self.assertIsNotNone(r2, "two shared locks must be held together")
        self.assertIsNone(self.c.try_lock(p, ttl=5), "an exclusive lock granted beside shared ones")
        r1.release()
        r2.release()
        w = self.c.try_lock(p, ttl=5)
        self.assertIsNotNone(w)
        w.release()

    def test_lost_when_session_ends(self):
        s = self.c.session(ttl=3)
        lk = s.lock(self.root + "/mine", timeout=5)
        lk.acquire()
        seen = []
        lk.on_lost(seen.append)
        self.c._t.request("DELETE", "/api/v1/sessions/%d" % s.id, token=s.token)
        self.assertTrue(lk.lost.wait(10), "the holder was not told")
        self.assertEqual(len(seen), 1)
        with self.assertRaises(latch.LatchError):
            lk.check()
        lk.release()  # a no-op now
        s.close()

    def test_session_lock_with_hold_ttl(self):
        with self.c.session(ttl=5) as s:
            with s.lock(self.root + "/h", ttl=2, timeout=5) as lk:
                self.assertFalse(lk.lost.wait(5), "lost: %s" % lk.error)
                lk.check()
                q = self.c.lock_queue(self.root + "/h")
                self.assertEqual([(x.get("node"), x["session_id"]) for x in q], [(lk.node, s.id)])


class Elections(Base):
    def test_campaign_proclaim_observe_resign(self):
        p = self.root + "/leader"
        e0 = self.c.election(p)
        self.assertIsNone(e0.leader())
        obs = e0.observe()
        self.assertTrue(next(obs).none)
        s1, s2 = self.c.session(ttl=5), self.c.session(ttl=5)
        e1, e2 = s1.election(p), s2.election(p)
        term1 = e1.campaign(b"one", timeout=5)
        ld = next(obs)
        self.assertEqual((ld.term, ld.data, ld.session_id), (term1, b"one", s1.id))
        e1.proclaim(b"uno")
        self.assertEqual(next(obs).data, b"uno")
        self.assertEqual(e0.leader().data, b"uno")
        with self.assertRaises(latch.Timeout):
            e2.campaign(b"two", timeout=0.3)
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("term", e2.campaign(b"two", timeout=20)))
        t.start()
        until("the second candidate queued", lambda: len(self.c.lock_queue(p)) == 2)
        e1.resign()
        t.join(30)
        ld = next(obs)
        while ld.none:  # between the two leaders
            ld = next(obs)
        self.assertEqual((ld.data, ld.term, ld.session_id), (b"two", got["term"], s2.id))
        self.assertGreater(got["term"], term1)
        obs.close()
        s1.close()
        s2.close()


class Watches(Base):
    def test_changes_in_order_once(self):
        p = self.root + "/w"
        self.c.create(p, b"0")
        with self.c.watch(p, kind="data,children") as w:
            self.c.set(p, b"1")
            self.c.create(p + "/kid")
            self.c.set(p, b"2")
            got = [next(w) for _ in range(3)]
        types = [[e.type for e in ch.events] for ch in got]
        self.assertEqual(types[0], ["data-changed"])
        self.assertEqual(types[2], ["data-changed"])
        self.assertIn("children-changed", types[1])
        revs = [ch.revision for ch in got]
        self.assertEqual(revs, sorted(set(revs)))

    def test_resync_surfaces(self):
        # More events than a watch may be sent at once since the revision
        # it asks for: the server answers resync, the watch yields it, then
        # goes on after it.
        p = self.root + "/burst"
        self.c.create(p)
        before = self.c.stat(p).mod_revision
        for batch in range(5):
            self.c.multi([latch.Op.create("%s/n%d-%d" % (p, batch, i)) for i in range(128)])
        # On the leader, which has applied all of it (a lagging member
        # would stream the rest live instead).
        lead = [m["api_addr"] for m in self.c.members() if m.get("leader")]
        c = new_client(lead + [a for a in ENV.split(",") if a not in lead])
        self.addCleanup(c.close)
        with c.watch(p, kind="recursive", from_revision=before) as w:
            first = next(w)
            self.assertTrue(first.resync, first)
            c.create(p + "/after")
            nxt = next(w)
            self.assertFalse(nxt.resync)
            self.assertIn(p + "/after", [e.path for e in nxt.events])
            self.assertGreater(nxt.revision, first.revision)


class LeaderKill(unittest.TestCase):
    """A leader killed while a lock is held, while a watch streams, and
    while a lock is waited for: the caller notices nothing but time."""

    def setUp(self):
        control("restart")  # all three up, a leader elected
        self.c = new_client()
        self.root = "/k-" + uuid.uuid4().hex[:8]
        self.c.create(self.root)

    def tearDown(self):
        self.c.close()
        control("restart")

    def leader_first(self):
        """The member list with the leader's API address first, so a
        client talks to the member that the kill takes away."""
        addrs = ENV.split(",")
        lead = [m["api_addr"] for m in self.c.members() if m.get("leader")]
        return lead + [a for a in addrs if a not in lead]

    def test_lock_held_across_leader_kill(self):
        c = new_client(self.leader_first())
        p = self.root + "/held"
        with self.subTest("implicit lease"), c.lock(p, ttl=4, timeout=10) as lk, \
                c.session(ttl=4) as s, s.lock(p + "-s", timeout=10) as slk:
            token = lk.fencing_token
            killed = control("kill-leader")
            # Through the election and beyond a whole ttl: still held.
            self.assertFalse(lk.lost.wait(8), "implicit-lease lock lost across %s: %s" % (killed["id"], lk.error))
            self.assertFalse(slk.lost.is_set(), "session lock lost: %s" % slk.error)
            self.assertFalse(s.lost.is_set(), "session lost: %s" % s.error)
            q = c.lock_queue(p)
            self.assertEqual([(x["granted"], x.get("node"), x["fencing_token"]) for x in q], [(True, lk.node, token)])
            self.assertIsNone(c.try_lock(p, ttl=4), "granted twice after the leader change")
        after = c.lock(p, ttl=4, timeout=10)
        with after:
            self.assertGreater(after.fencing_token, token)
        c.close()

    def test_watch_across_leader_kill(self):
        c = new_client(self.leader_first())
        p = self.root + "/stream"
        c.create(p)
        want = []
        with c.watch(p, kind="recursive") as w:
            watched = c._t.current()
            # A watch that stops delivering fails the test instead of hanging it.
            guard = threading.Timer(120, w.close)
            guard.start()
            self.addCleanup(guard.cancel)
            for i in range(5):
                want.append(c.create("%s/a%d" % (p, i)))
            killed = control("kill-leader")
            for i in range(5):
                want.append(c.create("%s/b%d" % (p, i)))
            seen, revs = [], []
            while len(seen) < len(want):
                ch = next(w, None)
                self.assertIsNotNone(ch, "the watch went silent: saw %s of %s (reconnects %d, at revision %s)"
                                     % (seen, want, w.reconnects, w.revision))
                self.assertFalse(ch.resync, "resync though the history is there")
                revs.append(ch.revision)
                seen.extend(e.path for e in ch.events if e.type == "created")
            self.assertEqual(seen, want, "every creation exactly once, in order")
            self.assertEqual(revs, sorted(set(revs)))
            if killed["api_addr"] == watched:
                self.assertGreaterEqual(w.reconnects, 1, "the watch's member died, yet it never reconnected")
        c.close()

    def test_election_across_leader_kill(self):
        c = new_client(self.leader_first())
        p = self.root + "/election"
        with c.session(ttl=4) as s:
            e = s.election(p)
            term = e.campaign(b"before", timeout=10)
            obs = c.election(p).observe()
            guard = threading.Timer(120, obs.close)  # silence fails, never hangs
            guard.start()
            self.addCleanup(guard.cancel)
            self.assertEqual((next(obs).data, term > 0), (b"before", True))
            watched = c._t.current()
            killed = control("kill-leader")
            e.proclaim(b"after")
            ld = next(obs, None)
            self.assertIsNotNone(ld, "the observation went silent")
            self.assertEqual((ld.data, ld.term, ld.session_id), (b"after", term, s.id))
            self.assertFalse(e.lost.is_set(), "leadership lost across the kill: %s" % e._lock.error)
            if killed["api_addr"] == watched:
                self.assertGreaterEqual(obs.reconnects, 1)
            obs.close()
            e.resign()
            self.assertIsNone(c.election(p).leader())
        c.close()

    def test_lock_waited_for_across_leader_kill(self):
        members = self.leader_first()
        c = new_client(members)
        p = self.root + "/queue"  # a last component the API also uses as a route name
        holder = c.session(ttl=4)
        a = holder.lock(p, timeout=10).acquire()
        got = {}

        def wait():
            try:
                with c.session(ttl=4) as s, s.lock(p, timeout=60) as b:
                    got["token"], got["recoveries"] = b.fencing_token, b.recoveries
            except Exception as e:  # reported by the test below
                got["error"] = e
        t = threading.Thread(target=wait)
        t.start()
        until("the waiter queued", lambda: len(c.lock_queue(p)) == 2)
        killed = control("kill-leader")
        self.assertFalse(a.lost.wait(1), "holder lost: %s" % a.error)
        a.release()
        t.join(60)
        self.assertFalse(t.is_alive(), "the waiter never got the lock")
        self.assertNotIn("error", got, "the waiter failed")
        self.assertGreater(got["token"], a.fencing_token)
        if killed["api_addr"] == members[0]:
            # The waiter's long poll was on the member killed: its answer
            # was lost and the lock found its request again.
            self.assertGreaterEqual(got["recoveries"], 1)
        holder.close()
        until("queue empty", lambda: c.lock_queue(p) == [])
        c.close()


if __name__ == "__main__":
    unittest.main()
