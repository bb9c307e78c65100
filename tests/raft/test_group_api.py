"""RaftGroup's own API (raft/group.py, raft/status.py): what node/ uses instead of pysyncobj's
internals, on real groups over the in-memory network."""

from __future__ import annotations

from raft_harness import Cluster

from raft.status import ProposalOutcome, Role


def test_status_role_leader_term_and_peers(tmp_path):
    c = Cluster.start("ours", tmp_path)
    try:
        leader = c.wait_leader()
        assert c.commit([1, 2]) == [1, 2]
        c.run_until(lambda: all(m.obj.status().last_applied == leader.obj.status().commit_index for m in c.members))
        names = {m.name for m in c.members}
        for m in c.members:
            st = m.obj.status()
            assert st.role is (Role.LEADER if m is leader else Role.FOLLOWER)
            assert m.obj.is_leader == (m is leader)
            assert st.leader == m.obj.leader_id == leader.name
            assert st.term == m.obj.term == leader.obj.term >= 1
            assert set(st.peers) == set(m.obj.peers) == names - {m.name}
            assert st.last_applied == st.commit_index and st.log_entries >= 2
        lst = leader.obj.status()
        assert set(lst.match_index) == names - {leader.name}
        assert all(index == lst.commit_index for index in lst.match_index.values())
    finally:
        c.destroy()


def test_callbacks_receive_a_proposal_outcome(tmp_path):
    c = Cluster.start("ours", tmp_path)
    try:
        early: list = []
        c["a"].propose(1, callback=lambda res, out: early.append(out))  # no leader elected yet
        c.run_until(lambda: early)
        assert early == [ProposalOutcome.MISSING_LEADER]
        leader = c.wait_leader()
        done: list = []
        leader.propose(2, callback=lambda res, out: done.append((res, out)))
        c.run_until(lambda: done)
        assert done == [(1, ProposalOutcome.SUCCESS)]  # ListMachine returns the count of values
    finally:
        c.destroy()


def test_membership_changes_report_their_outcome(tmp_path):
    c = Cluster.start("ours", tmp_path)
    try:
        leader = c.wait_leader()
        c.commit([1])  # a new leader changes membership only after committing in its term
        gone, stays = (m for m in c.members if m is not leader)
        removed: list = []
        leader.obj.remove_member(gone.name, callback=lambda res, out: removed.append(out))
        c.run_until(lambda: removed)
        assert removed == [ProposalOutcome.SUCCESS] and leader.obj.peers == (stays.name,)
        added: list = []
        stays.obj.add_member(gone.name, callback=lambda res, out: added.append(out))  # forwarded to the leader
        c.run_until(lambda: added)
        assert added == [ProposalOutcome.SUCCESS] and set(leader.obj.peers) == {gone.name, stays.name}
    finally:
        c.destroy()


def test_status_reports_the_last_log_index_and_the_snapshot_it_starts_from(tmp_path):
    c = Cluster.start("ours", tmp_path, logCompactionMinEntries=10)
    try:
        leader = c.wait_leader()
        first = leader.obj.status()
        assert first.snapshot_index == 0  # nothing compacted yet: the log starts at its no-op
        assert first.last_index == leader.last_index() >= first.commit_index
        c.commit(list(range(40)))  # past logCompactionMinEntries: each member compacts its log
        c.run_until(lambda: all(m.obj.status().snapshot_index > 0 for m in c.members))
        for m in c.members:
            st = m.obj.status()
            assert st.last_index == m.last_index() >= st.commit_index
            assert st.snapshot_index == m.raft_log[0][1] <= st.last_applied
            assert st.log_entries == st.last_index - st.snapshot_index + 1
    finally:
        c.destroy()


def test_leadership_goes_to_the_member_named(tmp_path):
    c = Cluster.start("ours", tmp_path)
    try:
        leader = c.wait_leader()
        c.commit([1])
        target = max((m for m in c.members if m is not leader), key=lambda m: m.name)
        c.run_until(lambda: leader.obj.status().match_index.get(target.name) == leader.obj.status().last_index)
        told: list = []
        leader.obj.transfer_leadership(lambda res, out: told.append(out), to=target.name)
        c.run_until(lambda: told)
        assert told == [ProposalOutcome.SUCCESS]
        c.run_until(lambda: target.obj.is_leader and all(m.obj.leader_id == target.name for m in c.members))
        refused: list = []
        target.obj.transfer_leadership(lambda res, out: refused.append(out), to="nobody:1")  # not a member
        c.run_until(lambda: refused)
        assert refused == [ProposalOutcome.REQUEST_DENIED] and target.obj.is_leader
    finally:
        c.destroy()


def test_election_timeouts_read_back_what_was_set(tmp_path):
    c = Cluster.start("ours", tmp_path)
    try:
        g = c.members[0].obj
        g.set_election_timeouts(30.0, 40.0)
        assert g.election_timeouts == (30.0, 40.0)
    finally:
        c.destroy()


def test_the_member_asked_to_campaign_first_leads_a_new_group(tmp_path):
    c = Cluster.start("ours", tmp_path, raftMinTimeout=30.0, raftMaxTimeout=40.0,
                      connectionTimeout=40.0)  # nobody campaigns on its own
    try:
        chosen = c.members[-1]
        assert chosen.obj.term == 0 and chosen.obj.leader_id is None
        chosen.obj.campaign_within(0.0)
        c.run_until(lambda: chosen.obj.is_leader and all(m.obj.leader_id == chosen.name for m in c.members))
        term = chosen.obj.term
        c.members[0].obj.campaign_within(0.0)  # a leader is known: no effect
        c.commit([1])
        assert chosen.obj.is_leader and chosen.obj.term == term
    finally:
        c.destroy()


def test_a_group_of_one_elects_itself_without_waiting_out_an_election_timeout(tmp_path):
    """A node alone (a single-node cluster, a quorum queue of one replica) has nobody to hear a
    leader from: it campaigns at once, so a start does not wait out the election timeout."""
    alone = Cluster.start("ours", tmp_path / "one", names=("a",), raftMinTimeout=30.0, raftMaxTimeout=40.0,
                          connectionTimeout=40.0)  # fmt: skip
    three = Cluster.start("ours", tmp_path / "three", raftMinTimeout=30.0, raftMaxTimeout=40.0, connectionTimeout=40.0)
    try:
        alone.run_until(lambda: alone.members[0].obj.is_leader, timeout=5.0)
        for _ in range(20):  # members with peers still wait their timeouts out
            three.step()
        assert all(m.obj.leader_id is None for m in three.members)
    finally:
        alone.destroy()
        three.destroy()
