"""The command line's Python tests (tools/python/pytest.sh; ctest python_tests)."""
import slow_tests


def pytest_configure(config):
    slow_tests.configure(config)


def pytest_collection_modifyitems(items):
    slow_tests.skip_when_asked(items)
