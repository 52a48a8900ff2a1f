"""CUDA's device numbers meet NVML's only through the GPU's UUID (CUDA_VISIBLE_DEVICES=1 is NVML's GPU 1)."""

from unittest import mock

import pytest

from gpubench.record import gpus, nvml

UUIDS = ["GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"]
NAMES = {UUIDS[0]: "NVIDIA H200", UUIDS[1]: "NVIDIA H200"}


@pytest.fixture
def two_gpus():
    """NVML sees two GPUs in PCI order; handles are their UUIDs."""
    with (
        mock.patch.object(nvml, "device_count", return_value=2),
        mock.patch.object(nvml, "handle", side_effect=lambda i: UUIDS[i]),
        mock.patch.object(nvml, "handle_by_uuid", side_effect=lambda u: u),
        mock.patch.object(nvml, "index_of", side_effect=UUIDS.index),
        mock.patch.object(nvml, "uuid_of", side_effect=lambda h: h),
        mock.patch.object(nvml, "name_of", side_effect=NAMES.get),
    ):
        yield


def test_cuda_device_0_under_visible_devices_1_is_nvml_gpu_1(two_gpus):
    # what CUDA reports for a process started with CUDA_VISIBLE_DEVICES=1: one device, the second GPU
    gpu = gpus.by_cuda_index(0, uuids=[UUIDS[1]])
    assert (gpu.cuda_index, gpu.nvml_index, gpu.uuid) == (0, 1, UUIDS[1])


def test_every_gpu_knows_its_cuda_index_where_cuda_sees_it(two_gpus):
    everyone = gpus.every_gpu(uuids=[UUIDS[1]])
    assert [(g.nvml_index, g.cuda_index) for g in everyone] == [(0, None), (1, 0)]


def test_a_cuda_index_past_the_visible_devices_is_refused(two_gpus):
    with pytest.raises(IndexError):
        gpus.by_cuda_index(1, uuids=[UUIDS[1]])


def test_a_childs_visible_devices_are_asked_of_cuda_in_the_child(two_gpus):
    with mock.patch.object(gpus, "cuda_uuids_under", return_value=[UUIDS[1]]) as ask:
        found, note = gpus.visible_under({"CUDA_VISIBLE_DEVICES": "1"})
    assert ask.call_args[0][0] == {"CUDA_VISIBLE_DEVICES": "1"}
    assert [g.nvml_index for g in found] == [1] and note is None


def test_without_a_cuda_driver_uuids_map_directly_and_numbers_are_a_stated_guess(two_gpus):
    with mock.patch.object(gpus, "cuda_uuids_under", side_effect=gpus.CudaUnavailable("no libcuda")):
        by_uuid, _ = gpus.visible_under({"CUDA_VISIBLE_DEVICES": UUIDS[1]})
        by_number, note = gpus.visible_under({"CUDA_VISIBLE_DEVICES": "1,0"})
    assert [g.nvml_index for g in by_uuid] == [1]
    assert [(g.nvml_index, g.cuda_index) for g in by_number] == [(1, 0), (0, 1)]
    assert "PCI order" in note


def test_no_visible_devices_means_every_gpu(two_gpus):
    found, note = gpus.visible_under({})
    assert [g.nvml_index for g in found] == [0, 1] and note is None


def test_uuid_bytes_format_as_nvml_writes_them():
    raw = bytes.fromhex("e3d7bf9eadde70943c665bfb10f48a67")
    assert gpus._format_uuid(raw) == "GPU-e3d7bf9e-adde-7094-3c66-5bfb10f48a67"
