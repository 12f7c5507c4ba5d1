"""Kubernetes quantities and the resource arithmetic the scheduler relies on."""
from __future__ import annotations

from fractions import Fraction

import pytest

from phalanx.objects.quantity import (
    QuantityError,
    add_resources,
    container_requests,
    format_cpu,
    format_exact,
    format_memory,
    format_quantity,
    parse_exact,
    parse_quantity,
    parse_resource_list,
    pod_requests,
    same_resources,
    sum_resources,
)


@pytest.mark.parametrize(
    "text, value",
    [
        ("1", 1.0), ("500m", 0.5), ("100Mi", 100 * 2**20), ("1Gi", 2**30), ("1e3", 1000.0),
        ("1E-3", 0.001), ("0.5", 0.5), (".5", 0.5), ("1.", 1.0), ("+2", 2.0), ("-1Ki", -1024.0),
        ("1k", 1000.0), ("2M", 2e6), ("3G", 3e9), ("1T", 1e12), ("1P", 1e15), ("1E", 1e18),
        ("4Ti", 4 * 2**40), ("1Ei", 2**60), ("250n", 250e-9), ("10u", 1e-5), ("1.5Gi", 1.5 * 2**30),
        (2, 2.0), (0.25, 0.25), (0, 0.0),
    ],
)
def test_parse_quantity(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    "bad", ["", "abc", "1K", "1Mib", "1 ", " 1", "1\n", "e3", "1e", "1.2.3", "--1", "1mi", "0x10", "١"],
)
def test_malformed_quantities_name_the_rule(bad: str) -> None:
    with pytest.raises(ValueError, match="regular expression"):
        parse_quantity(bad)


@pytest.mark.parametrize("bad", [True, None, [], {}, "1e999", 10**400, float("nan"), float("inf"), "9" * 200])
def test_non_quantities_raise_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


@pytest.mark.parametrize("cores, text", [(2.0, "2"), (0.5, "500m"), (0.1, "100m"), (1.5, "1500m"),
                                          (0.0001, "1m"), (0.0, "0"), (4, "4")])
def test_format_cpu(cores: float, text: str) -> None:
    assert format_cpu(cores) == text
    assert parse_quantity(text) == pytest.approx(max(cores, 0.001) if cores else 0.0)


@pytest.mark.parametrize("nbytes, text", [(100 * 2**20, "100Mi"), (2**30, "1Gi"), (3 * 2**30, "3Gi"),
                                           (1e9, "1G"), (1000, "1k"), (1025, "1025"), (0, "0"),
                                           (400 * 2**20, "400Mi"), (2**10, "1Ki")])
def test_format_memory_round_trips(nbytes: float, text: str) -> None:
    assert format_memory(nbytes) == text
    assert parse_quantity(text) == nbytes


def test_format_quantity_picks_the_unit_by_resource() -> None:
    assert format_quantity("cpu", 0.25) == "250m"
    assert format_quantity("memory", 2**20) == "1Mi"
    assert format_quantity("nvidia.com/gpu", 2) == "2"
    assert format_quantity("pods", 110) == "110"


def test_resource_list_helpers() -> None:
    a = parse_resource_list({"cpu": "1", "memory": "100Mi"})
    b = parse_resource_list({"cpu": 2, "nvidia.com/gpu": "1"})
    assert add_resources(a, b) == {"cpu": 3.0, "memory": 100 * 2**20, "nvidia.com/gpu": 1.0}
    assert sum_resources([a, a, b]) == {"cpu": 4.0, "memory": 200 * 2**20, "nvidia.com/gpu": 1.0}
    assert sum_resources([]) == {}
    with pytest.raises(ValueError, match="^cpu: "):
        parse_resource_list({"cpu": "lots"})


def test_container_request_falls_back_to_limit_per_resource() -> None:
    c = {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "500m"}}}
    assert container_requests(c) == {"cpu": 0.5, "memory": 2**30}
    assert container_requests({}) == {}
    assert container_requests({"resources": {"limits": {"cpu": "1"}}}) == {"cpu": 1.0}


def test_seed_pod_requests_are_its_limits() -> None:
    # seed 000: limits cpu 1 / memory 100Mi and no requests -> the scheduler counts 1 cpu / 100Mi.
    spec = {"containers": [{"name": "pytorch", "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}]}
    assert pod_requests(spec) == {"cpu": 1.0, "memory": 100 * 2**20}


def test_pod_requests_take_the_larger_of_containers_and_any_init_container() -> None:
    spec = {
        "initContainers": [
            {"name": "big-init", "resources": {"requests": {"cpu": "3", "memory": "10Mi"}}},
            {"name": "small-init", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}},
        ],
    }
    # cpu: max(1 + 1, 3, 0.1) = 3; memory: max(200Mi, 10Mi, 1Gi) = 1Gi
    assert pod_requests(spec) == {"cpu": 3.0, "memory": 2**30}


def test_pod_requests_count_sidecars_and_overhead() -> None:
    spec = {
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "2"}}},
        ],
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}],
        "overhead": {"cpu": "100m"},
    }
    # app + sidecar = 1.5; init runs next to the sidecar: 2.5 -> 2.5, plus overhead 0.1
    assert pod_requests(spec) == {"cpu": pytest.approx(2.6)}


def test_pod_requests_of_an_empty_pod_is_empty() -> None:
    assert pod_requests({}) == {}


@pytest.mark.parametrize("text, value", [
    ("1", 1), ("500m", Fraction(1, 2)), ("100Mi", 100 * 2**20), ("1Gi", 2**30), ("1e3", 1000), ("1E", 10**18),
    ("2k", 2000), (".5", Fraction(1, 2)), (3, 3), (0.25, Fraction(1, 4)),
])
def test_parse_exact(text, value):
    assert parse_exact(text)[0] == value


@pytest.mark.parametrize("value, fmt, text", [
    (4, "DecimalSI", "4"), (Fraction(3, 2), "DecimalSI", "1500m"), (2000, "DecimalSI", "2k"),
    (400 * 2**20, "BinarySI", "400Mi"), (1536 * 2**20, "BinarySI", "1536Mi"), (2**30, "BinarySI", "1Gi"),
    (512, "BinarySI", "512"), (Fraction(1, 2), "BinarySI", "500m"), (0, "BinarySI", "0"),
    (3000, "DecimalExponent", "3e3"), (Fraction(1, 10**10), "DecimalSI", "1n"),
])
def test_format_exact(value, fmt, text):
    assert format_exact(Fraction(value), fmt) == text


def test_quantities_compare_by_value():
    assert same_resources({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1073741824"})
    assert not same_resources({"cpu": "1"}, {"cpu": "2"})
    assert not same_resources({"cpu": "1"}, {"cpu": "1", "memory": "1"})


def test_exact_quantities_are_parsed_once_and_booleans_still_refused():
    # Every round sums the PodGroup's minResources from the same few strings: cached.
    assert parse_exact("100Mi") is parse_exact("100Mi") and parse_exact("100Mi")[0] == 100 * 1024**2
    assert format_exact(parse_exact("1500m")[0]) is format_exact(parse_exact("1500m")[0]) == "1500m"
    assert parse_exact(1) == parse_exact(" 1 ") == (1, "DecimalSI")
    for bad in (True, None, "1x"):
        try:
            parse_exact(bad)
        except QuantityError:
            continue
        raise AssertionError(f"{bad!r} accepted")
