"""placeholder: filled in next"""
