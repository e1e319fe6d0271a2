"""stacks"""
