#!/usr/bin/python3
"""Tests of ddlsim_plots.py on the fixtures in tests/plots_fixtures/.

Run with Debian's interpreter: /usr/bin/python3 plots/test_plots.py
Every sub-command must write valid PDF, PNG and SVG files of the promised width, the same
bytes every time (in one process and across processes); every malformed or missing input
must give exit status 2 and one line on stderr that names the file.
"""

import contextlib
import io
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "tests", "plots_fixtures"))
SCRIPT = os.path.join(HERE, "ddlsim_plots.py")
sys.path.insert(0, HERE)

import ddlsim_plots  # noqa: E402


def fixture(name):
    return os.path.join(FIXTURES, name)


# name: command line, less --out
FIGURES = {
    "breakdown": ["breakdown", fixture("run.json")],
    "breakdown-two-files": ["breakdown", fixture("run.json"), fixture("run-8nodes.json"),
                            "--vertical", "--wide", "--title", "4 and 8 servers"],
    "scaling": ["scaling", fixture("sweep.csv"), "--x", "cluster.nodes"],
    "scaling-devices": ["scaling", fixture("sweep.csv"), "--x", "devices", "--by",
                        "cluster.accelerator", "--where", "simulation.network=analytical",
                        "--wide"],
    "memory": ["memory", fixture("run.json")],
    "timeline": ["timeline", fixture("trace.json")],
    "timeline-all": ["timeline", fixture("trace.json"), "--tracks", r"\.compute$"],
    "links": ["links", fixture("links.csv"), "--top", "12"],
    "links-infiniband": ["links", fixture("links.csv"), "--kind", "ib-hdr", "--no-values"],
    "convergence": ["convergence", fixture("search.json"), fixture("search-grid.json"),
                    "--logx"],
    "accuracy": ["accuracy", fixture("validate.csv")],
    "accuracy-models": ["accuracy", fixture("validate.csv"), "--by", "model"],
    "accuracy-busbw": ["accuracy", fixture("validate.csv"), "--unit", "GB/s"],
    "accuracy-wide": ["accuracy", fixture("validate.csv"), "--wide"],
    "accuracy-old-header": ["accuracy", fixture("validate-old-header.csv")],
    "tornado": ["tornado", fixture("sweep.csv")],
    "tornado-ptd-p": ["tornado", fixture("sweep.csv"), "--strategy", "ptd-p"],
    "tornado-invalid-points": ["tornado", fixture("sweep-invalid-points.csv")],
}

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_main(argv):
    """main() in this process: (exit status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = ddlsim_plots.main(argv)
        except SystemExit as e:  # argparse
            status = e.code
    return status, err.getvalue()


class Figures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.outputs = {}
        for run in ("first", "second"):
            os.mkdir(os.path.join(cls.tmp.name, run))
        for name, argv in FIGURES.items():
            for run in ("first", "second"):
                prefix = os.path.join(cls.tmp.name, run, name)
                status, err = run_main(argv + ["--out", prefix])
                cls.outputs[(run, name)] = (status, err, prefix)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def read(self, prefix, fmt):
        with open(f"{prefix}.{fmt}", "rb") as f:
            return f.read()

    def test_every_figure_is_written_in_three_valid_formats(self):
        for name, argv in FIGURES.items():
            with self.subTest(figure=name):
                status, err, prefix = self.outputs[("first", name)]
                self.assertEqual((status, err), (0, ""))
                pdf = self.read(prefix, "pdf")
                self.assertTrue(pdf.startswith(b"%PDF-"))
                self.assertTrue(pdf.rstrip().endswith(b"%%EOF"))
                png = self.read(prefix, "png")
                self.assertTrue(png.startswith(PNG_SIGNATURE))
                width, height = struct.unpack(">II", png[16:24])
                # 300 dpi: 3.4 in (or --wide, 7 in) exactly, a plausible height.
                self.assertEqual(width, 2100 if "--wide" in argv else 1020)
                self.assertTrue(300 <= height <= 2400, height)
                root = ET.fromstring(self.read(prefix, "svg"))
                self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")
                self.assertGreater(len(root.findall(".//{http://www.w3.org/2000/svg}path")), 10)

    def test_two_runs_give_identical_bytes(self):
        for name in FIGURES:
            for fmt in ("pdf", "png", "svg"):
                with self.subTest(figure=name, format=fmt):
                    first = self.read(self.outputs[("first", name)][2], fmt)
                    second = self.read(self.outputs[("second", name)][2], fmt)
                    self.assertEqual(first, second)

    def test_another_process_gives_identical_bytes(self):
        prefix = os.path.join(self.tmp.name, "subprocess-scaling")
        done = subprocess.run([sys.executable, SCRIPT] + FIGURES["scaling"] + ["--out", prefix],
                              capture_output=True, text=True)
        self.assertEqual((done.returncode, done.stderr), (0, ""))
        for fmt in ("pdf", "png", "svg"):
            with self.subTest(format=fmt):
                self.assertEqual(self.read(prefix, fmt),
                                 self.read(self.outputs[("first", "scaling")][2], fmt))

    def test_formats_option_writes_only_those(self):
        prefix = os.path.join(self.tmp.name, "only-svg")
        self.assertEqual(run_main(FIGURES["memory"] + ["--out", prefix, "--formats", "svg"]),
                         (0, ""))
        self.assertTrue(os.path.exists(prefix + ".svg"))
        self.assertFalse(os.path.exists(prefix + ".pdf") or os.path.exists(prefix + ".png"))


class Errors(unittest.TestCase):
    """Bad input: exit status 2, one line 'ddlsim-plots: FILE: ...', no figure written."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.prefix = os.path.join(self.tmp.name, "figure")

    def tearDown(self):
        self.tmp.cleanup()

    def assertRefused(self, status, err, path, words):
        self.assertEqual(status, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertTrue(err.startswith(f"ddlsim-plots: {path}: "), err)
        self.assertIn(words, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(os.listdir(self.tmp.name), [])

    def test_in_separate_processes(self):
        cases = [
            (["breakdown", fixture("bad.json")], fixture("bad.json"), "not valid JSON"),
            (["memory", fixture("missing-field.json")], fixture("missing-field.json"),
             "strategies.1: missing field 'memory_breakdown_bytes.optimizer'"),
            (["links", fixture("bad.csv")], fixture("bad.csv"), "missing column 'utilization'"),
            (["accuracy", fixture("ragged.csv")], fixture("ragged.csv"),
             "line 4: 13 fields, the header has 16"),
            (["timeline", fixture("absent.json")], fixture("absent.json"),
             "No such file or directory"),
        ]
        # Started together: each process spends most of its second importing matplotlib.
        running = [(subprocess.Popen([sys.executable, SCRIPT] + argv + ["--out", self.prefix],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True), path, words) for argv, path, words in cases]
        for process, path, words in running:
            out, err = process.communicate()
            with self.subTest(path=path):
                self.assertEqual(out, "")
                self.assertRefused(process.returncode, err, path, words)

    def test_in_process(self):
        sweep, trace = fixture("sweep.csv"), fixture("trace.json")
        cases = [
            (["breakdown", fixture("missing-field.json")], fixture("missing-field.json"),
             "strategies.1: missing field 'breakdown.bubble_s'"),
            (["breakdown", fixture("run.json"), fixture("bad.json")], fixture("bad.json"),
             "not valid JSON"),
            (["scaling", sweep, "--x", "nodes"], sweep, "missing column 'nodes'"),
            (["scaling", fixture("validate.csv"), "--x", "gpus"], fixture("validate.csv"),
             "missing column 'strategy'"),
            (["scaling", sweep, "--x", "devices", "--where", "cluster.nodes=3"], sweep,
             "no row with metrics"),
            (["scaling", sweep, "--x", "devices", "--where", "cluster.gpus=3"], sweep,
             "no column 'cluster.gpus'"),
            (["timeline", fixture("run.json")], fixture("run.json"),
             "missing field 'traceEvents'"),
            (["timeline", trace, "--tracks", "^gpu"], trace, "no track name matches"),
            (["links", fixture("ragged.csv")], fixture("ragged.csv"), "missing columns"),
            (["convergence", fixture("run.json")], fixture("run.json"),
             "missing field 'method'"),
            (["convergence", fixture("search.json"), fixture("absent.json")],
             fixture("absent.json"), "No such file or directory"),
            (["accuracy", fixture("sweep.csv")], sweep, "missing columns"),
            (["accuracy", fixture("validate.csv"), "--unit", "TB"], fixture("validate.csv"),
             "no case in unit 'TB' (units: s, GB/s, us)"),
            (["links", fixture("links.csv"), "--kind", "nvlink9"], fixture("links.csv"),
             "no link of kind 'nvlink9'"),
            (["tornado", sweep, "--strategy", "zero3"], sweep,
             "no rows for strategy 'zero3' (strategies: dp, ptd-p)"),
            (["tornado", fixture("links.csv")], fixture("links.csv"), "missing columns"),
        ]
        for argv, path, words in cases:
            with self.subTest(argv=argv):
                status, err = run_main(argv + ["--out", self.prefix])
                self.assertRefused(status, err, path, words)

    def test_malformed_cells(self):
        header = "strategy,link,kind,bytes,utilization\n"
        for body, words in [('"dp","a -> b","ib",1,lots\n', "line 2: column 'utilization': "
                                                              "'lots' is not a number"),
                            ('"dp","a -> b","ib",1,-0.5\n', "is negative"),
                            ('"dp","a -> b","ib",1,0.5\n"dp","a -> b","ib",1,0.5\n',
                             "line 3: a second row for strategy 'dp', link 'a -> b'"),
                            ("", "no data rows")]:
            path = os.path.join(tempfile.gettempdir(), f"ddlsim-plots-test-{os.getpid()}.csv")
            with open(path, "w") as f:
                f.write(header + body)
            try:
                with self.subTest(body=body):
                    self.assertRefused(*run_main(["links", path, "--out", self.prefix]), path,
                                       words)
            finally:
                os.unlink(path)

    def test_unwritable_output_is_status_1(self):
        target = os.path.join(self.tmp.name, "no-such-dir", "figure")
        status, err = run_main(["memory", fixture("run.json"), "--out", target])
        self.assertEqual(status, 1)
        self.assertEqual(err, f"ddlsim-plots: {target}.pdf: No such file or directory\n")

    def test_bad_usage_is_status_2(self):
        for argv in (["memory"], ["links", fixture("links.csv"), "--top", "0"],
                     ["memory", fixture("run.json"), "--formats", "jpg"], ["histogram"],
                     ["timeline", fixture("trace.json"), "--tracks", "("],
                     ["scaling", fixture("sweep.csv")]):
            with self.subTest(argv=argv):
                self.assertEqual(run_main(argv)[0], 2)


if __name__ == "__main__":
    unittest.main(verbosity=1)
