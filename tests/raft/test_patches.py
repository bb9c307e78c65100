

def test_importing_pysyncobj_leaves_the_socket_modules_inet_ntop_working():
    import socket

    import raft.group  # noqa: F401  (pysyncobj with it)

    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
    assert socket.inet_ntop(socket.AF_INET6, b"\x00" * 15 + b"\x01") == "::1"
