"""A test class for each of several items, so that `make test` spreads them over its workers:
pytest-xdist's --dist loadscope keeps a module's tests on one worker but hands out each class on
its own (the gate's parts, the demo's assignments, the hosted runtime's notebooks)."""


def class_each(namespace, items, class_name, test):
    """In `namespace` (a test module's globals()), a class named class_name(item) for each item, whose one
    method is test(item) (a function taking self and fixtures, named test_...)."""
    for item in items:
        method = test(item)
        namespace[class_name(item)] = type(class_name(item), (), {method.__name__: method})
