"""The package list, derived: pyproject.toml's packages.find sees a package only in the folder of its name, so
the packages its package-dir maps from elsewhere (kernels/ as gpubench.kernels, results/calibration as
gpubench.calibration) are added here from that mapping, with any packages inside their folders. All the rest of
the build is declared in pyproject.toml."""

from setuptools import find_packages, setup
from setuptools.dist import Distribution


class MappedPackages(Distribution):
    def parse_config_files(self, *args, **kwargs):
        super().parse_config_files(*args, **kwargs)  # pyproject.toml: packages.find and package-dir
        found = set(self.packages or ())
        for name, folder in (self.package_dir or {}).items():
            if name and name not in found:
                found |= {name, *(f"{name}.{sub}" for sub in find_packages(folder))}
        self.packages = sorted(found)


if __name__ == "__main__":  # the build runs this file as a script; a test imports the class
    setup(distclass=MappedPackages)
