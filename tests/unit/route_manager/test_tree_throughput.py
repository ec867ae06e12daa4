"""The dispatch-tree throughput model (docs/tree-throughput.md): the flat case is eq. (3) and
(4), a hand-worked 2-level tree, and which node bounds the network."""
import math

import pytest

from route_manager.models.throughput import (OperatingPoint, SystemParameters, TreeNode, tp_dispatcher,
                                      tp_outgoing, tree_level_hit_ratios, tree_throughput)

US = 1e-6


def test_a_flat_network_is_equation_3_and_4():
    params = SystemParameters(n_servers=20, t_f=150 * US, t_c=30 * US, bandwidth=10e6,
                              message_size=3000)
    point = OperatingPoint(1.0, t_d=4 * US, hit_ratio=0.15)
    root = TreeNode("root", 0, fan_out=20, t_f=150 * US, t_d=4 * US, t_c=30 * US,
                    hit_ratio=0.15, bandwidth=10e6, message_size=3000)
    prediction = tree_throughput([root])
    assert prediction.cpu["root"] == pytest.approx(tp_dispatcher(params, point))
    assert prediction.link["root"] == pytest.approx(tp_outgoing(params, point))
    assert prediction.throughput == pytest.approx(min(tp_dispatcher(params, point),
                                                      tp_outgoing(params, point)))
    assert tree_level_hit_ratios([root]) == [pytest.approx(0.15)]


def two_level_tree() -> list[TreeNode]:
    # root over 4 children; each child sees half the events and routes them to 5 servers
    root = TreeNode("root", 0, fan_out=4, t_f=100 * US, t_d=5 * US, t_c=20 * US, hit_ratio=0.5)
    children = [TreeNode(f"c{k}", 1, fan_out=5, t_f=100 * US, t_d=4 * US, t_c=20 * US,
                         hit_ratio=0.4, share=0.5) for k in range(4)]
    return [root, *children]


def test_a_hand_worked_two_level_tree():
    prediction = tree_throughput(two_level_tree())
    # root: 100 + 5 x 4 + 20 x 0.5 x 4 = 160 us per event -> 6,250 events/s
    assert prediction.cpu["root"] == pytest.approx(6250)
    # a child: 100 + 4 x 5 + 20 x 0.4 x 5 = 160 us per event it sees, and it sees half
    assert prediction.cpu["c0"] == pytest.approx(12500)
    assert prediction.throughput == pytest.approx(6250)
    assert prediction.bottleneck == "root cpu"
    assert prediction.cpu_per_event()["c1"] == pytest.approx(80 * US)
    # R per level: the root's 0.5 x 4 copies over 4 children; the children's 4 x 0.5 x 0.4 x 5
    # copies per published event over 20 servers
    assert tree_level_hit_ratios(two_level_tree()) == [pytest.approx(0.5), pytest.approx(0.2)]
    # against the same 20 servers flat (T_d over 20, R 0.2): 100 + 100 + 80 = 280 us
    flat = tree_throughput([TreeNode("root", 0, fan_out=20, t_f=100 * US, t_d=5 * US,
                                     t_c=20 * US, hit_ratio=0.2)])
    assert flat.throughput == pytest.approx(1 / (280 * US))


def test_the_bottleneck_moves_to_a_child_a_link_or_the_shared_machine():
    nodes = two_level_tree()
    # a child that sees every event and pays twice per event bounds the tree
    hot = TreeNode("c0", 1, fan_out=5, t_f=300 * US, t_d=4 * US, t_c=20 * US, hit_ratio=0.4,
                   share=1.0)
    prediction = tree_throughput([nodes[0], hot, *nodes[2:]])
    assert prediction.bottleneck == "c0 cpu"
    assert prediction.throughput == pytest.approx(1 / (360 * US))
    # a slow link at the root: 2 copies x 1,000 B per event over 1 MB/s -> 500 events/s
    slow = TreeNode("root", 0, fan_out=4, t_f=100 * US, t_d=5 * US, t_c=20 * US, hit_ratio=0.5,
                    bandwidth=1e6, message_size=1000)
    prediction = tree_throughput([slow, *nodes[1:]])
    assert prediction.bottleneck == "root link"
    assert prediction.throughput == pytest.approx(500)
    # every process on 2 cores: (160 + 4 x 0.5 x 160) us per event over 2 cores
    prediction = tree_throughput(nodes, cores=2)
    assert prediction.bottleneck == "shared cpu"
    assert prediction.throughput == pytest.approx(2 / (480 * US))
    assert tree_throughput(nodes, cores=2, other_cpu_per_event=520 * US).throughput == \
        pytest.approx(2000)


def test_leaves_and_idle_nodes():
    leaf = TreeNode("s1", 2, fan_out=0, t_f=50 * US, share=0.2)  # a server: T_s F per copy
    prediction = tree_throughput([*two_level_tree(), leaf])
    assert prediction.cpu["s1"] == pytest.approx(1 / (50 * US) / 0.2)
    assert prediction.link["s1"] == math.inf
    # a node that sees nothing bounds nothing
    assert tree_throughput([TreeNode("c9", 1, fan_out=5, t_f=1e-3, share=0.0)]).throughput \
        == math.inf


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        TreeNode("x", 0, fan_out=2, hit_ratio=1.5)
    with pytest.raises(ValueError):
        TreeNode("x", 0, fan_out=2, bandwidth=1e6)
    with pytest.raises(ValueError):
        tree_throughput([])
    with pytest.raises(ValueError):
        tree_throughput([TreeNode("x", 0, 1), TreeNode("x", 1, 1)])
    with pytest.raises(ValueError):
        tree_throughput([TreeNode("x", 0, 1)], cores=0)
