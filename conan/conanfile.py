# Conan recipe for users who build conveyor outside Debian. The primary build path is Debian's
# packages (scripts/setup.sh); nothing in this folder is needed there.
from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout


class ConveyorConan(ConanFile):
    name = "conveyor"
    version = "0.1.0"
    license = "Apache-2.0"
    description = "A distributed input-data service for ML training (tf.data service on CAF)"
    settings = "os", "compiler", "build_type", "arch"
    exports_sources = "CMakeLists.txt", "cmake/*", "pipeline/*", "messages/*", "actors/*", "apps/*", "include/*", "test/*"
    requires = (
        "caf/0.17.6",
        "cereal/1.3.2",
        "lz4/1.9.4",
        "boost/1.74.0",
        "doctest/2.4.9",
    )
    generators = "CMakeDeps"

    def layout(self):
        cmake_layout(self)

    def generate(self):
        CMakeToolchain(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        CMake(self).install()
