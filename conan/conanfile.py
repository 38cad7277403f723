# Conan 2 recipe for users who build conveyor outside Debian. The primary build path is Debian's
# packages (scripts/setup.sh); nothing in this folder is needed there.
#   conan create conan/ --build=missing      builds, packages (cmake --install) and runs test_package
# It packages what `cmake --install` installs: the static libraries, the public headers
# (include/conveyor/), the `conveyor` command, and the same CMake targets as the installed
# conveyorConfig.cmake: conveyor::client, conveyor::server. The simulator is not packaged: the
# recipe builds with CONVEYOR_SIM=OFF (no conveyor_sim, conveyor-sim or sim tests).
# CI checks it where conan is installed: ctest -R package_conan (skipped otherwise).
import os

from conan import ConanFile
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy


class ConveyorConan(ConanFile):
    name = "conveyor"
    version = "0.1.0"
    license = "Apache-2.0"
    description = "A distributed input-data service for ML training (tf.data service on CAF)"
    package_type = "static-library"
    settings = "os", "compiler", "build_type", "arch"
    options = {"fPIC": [True, False]}
    default_options = {"fPIC": True}

    def export_sources(self):
        # The recipe lives in conan/; the sources are the repository around it.
        root = os.path.join(self.recipe_folder, "..")
        for pattern in ("CMakeLists.txt", "cmake/*", "pipeline/*", "messages/*", "dispatcher/*", "worker/*",
                        "consumer/*", "coordinated/*", "net/*", "node/*", "sim/*",
                        "apps/*", "include/*", "test/*", "scripts/*", "examples/*", "python/*"):
            copy(self, pattern, src=root, dst=self.export_sources_folder)

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        # Public headers include CAF (conveyor/async.hpp); lz4 and Boost.Filesystem are linked
        # by the static libraries; cereal is header-only and used inside the build only.
        self.requires("caf/0.17.6", transitive_headers=True)
        self.requires("lz4/1.9.4")
        self.requires("boost/1.74.0")
        self.requires("spdlog/1.10.0")          # node/log.cpp (static libs: users link it)
        self.requires("prometheus-cpp/1.1.0")   # node/metrics.cpp
        self.requires("protobuf/3.21.12")       # pipeline/io/example.cpp (libprotobuf-lite)
        self.requires("zlib/1.2.13")            # pipeline/io/files.cpp (GZIP/ZLIB files)
        self.requires("libcurl/8.6.0")          # pipeline/io/http.cpp (http(s):// objects)
        self.requires("openssl/3.0.13")         # TLS (CAF's openssl module, start-up checks)
        self.requires("cereal/1.3.2", visible=False)

    def build_requirements(self):
        self.test_requires("doctest/2.4.9")

    def _run_tests(self):
        # Off unless asked for (-c tools.build:skip_test=False): the unit tests, not the
        # simulator sweeps or the real-process integration tests.
        return not self.conf.get("tools.build:skip_test", default=True, check_type=bool)

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables["CONVEYOR_BUILD_TESTS"] = self._run_tests()
        tc.cache_variables["CONVEYOR_BUILD_PYTHON"] = False  # the C++ package only
        tc.cache_variables["CONVEYOR_SIM"] = False  # the simulator is test machinery: not packaged
        # The image ops find libturbojpeg, libpng and libwebp with pkg-config, which this recipe
        # does not provide (no PkgConfigDeps, no requires): the conan package is built without them.
        tc.cache_variables["CONVEYOR_IMAGE_OPS"] = False
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()
        if self._run_tests():
            self.run(f"ctest --test-dir \"{self.build_folder}\" -R \"^unit_\" --output-on-failure")

    def package(self):
        CMake(self).install()

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "conveyor")
        self.cpp_info.set_property("pkg_config_name", "conveyor")
        c = self.cpp_info.components
        c["pipeline"].libs = ["conveyor_pipeline"]
        c["pipeline"].set_property("cmake_target_name", "conveyor::pipeline")
        c["pipeline"].requires = ["lz4::lz4", "boost::filesystem", "protobuf::libprotobuf-lite",
                                  "zlib::zlib", "libcurl::libcurl"]
        if self.settings.os in ("Linux", "FreeBSD"):
            c["pipeline"].system_libs = ["pthread", "dl"]
        c["messages"].libs = ["conveyor_messages"]
        c["messages"].set_property("cmake_target_name", "conveyor::messages")
        c["messages"].requires = ["pipeline", "caf::caf"]
        c["actors"].libs = ["conveyor_actors"]
        c["actors"].set_property("cmake_target_name", "conveyor::actors")
        c["actors"].requires = ["messages", "caf::caf", "spdlog::spdlog", "prometheus-cpp::prometheus-cpp",
                                "openssl::ssl"]
        # What users link (the same names as the installed conveyorConfig.cmake).
        c["client"].set_property("cmake_target_name", "conveyor::client")
        c["client"].requires = ["actors"]
        c["server"].set_property("cmake_target_name", "conveyor::server")
        c["server"].requires = ["actors"]
